"""The connector end to end: the official MCP client over a real socket, the demo sellers and
facilitator, settlement on the dev chain."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import mcp_types as types

from paysign.services.catalog import demo_catalog, import_catalog

from .conftest import Buyer, World, balance, connect, make_buyer

CATALOG_TOOLS = {"market_quote", "company_filings", "weather_forecast", "translate_text"}
BUILT_IN_TOOLS = {"pay_x402", "search_bazaar", "wallet_status"}


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return dict(result.structured_content)


# ---- auth: the challenge, the metadata, invalid credentials ----


def test_no_credential_gets_the_exact_challenge(world: World) -> None:
    r = httpx.post(world.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401
    assert r.json() == {"message": "Unauthorized"}
    assert r.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{world.mcp_url}/.well-known/oauth-protected-resource", '
        f'scope="{world.mcp_url}/access"'
    )


def test_invalid_and_oauth_like_tokens_are_invalid_token(world: World) -> None:
    for token in ("psk_" + "x" * 43, "some-oauth-access-token"):
        r = httpx.post(
            world.mcp_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 401
        assert r.json() == {"message": "Unauthorized"}
        assert r.headers["www-authenticate"].startswith('Bearer error="invalid_token", ')
        assert f'scope="{world.mcp_url}/access"' in r.headers["www-authenticate"]


def test_protected_resource_metadata_at_every_address(world: World) -> None:
    expected = {
        "resource": world.mcp_url,
        "authorization_servers": [world.settings.resolved_auth_url],
        "scopes_supported": [f"{world.mcp_url}/access"],
    }
    for path in (
        "/.well-known/oauth-protected-resource",  # at the host root (spec 5.2's note)
        "/.well-known/oauth-protected-resource/mcp",  # RFC 9728 path-inserted
        "/mcp/.well-known/oauth-protected-resource",  # the address the challenge names
    ):
        r = httpx.get(world.service + path)
        assert r.status_code == 200, path
        assert {k: r.json()[k] for k in expected} == expected


# ---- tools ----


def test_list_tools_in_both_protocol_eras(world: World, buyer: Buyer) -> None:
    async def scenario(mode: str) -> tuple[set[str], Any]:
        async with connect(world.mcp_url, buyer.api_key, mode=mode) as client:
            tools = (await client.list_tools()).tools
            by_name = {t.name: t for t in tools}
            weather = by_name["weather_forecast"]
            assert "0.002 USDC" in (weather.description or "")
            assert weather.input_schema["required"] == ["city"]
            assert weather.input_schema["properties"]["sandbox"]["type"] == "boolean"
            assert by_name["company_filings"].input_schema["properties"]["sandbox"]["type"] == (
                "boolean"
            )
            assert "text" in by_name["translate_text"].input_schema["properties"]
            return set(by_name), client.session

    names, _ = run(scenario("legacy"))
    assert names == CATALOG_TOOLS | BUILT_IN_TOOLS  # no OPEN_ECOSYSTEM tool
    names, _ = run(scenario("auto"))  # 2026-07-28, stateless envelope
    assert names == CATALOG_TOOLS | BUILT_IN_TOOLS


def test_catalog_tool_pays_and_settles_on_chain(world: World, buyer: Buyer) -> None:
    listing = next(
        x for x in demo_catalog(world.sellers)["catalog"] if x["name"] == "weather_forecast"
    )
    before = balance(world, buyer.wallet), balance(world, world.sandbox_pay_to)

    async def scenario() -> types.CallToolResult:
        async with connect(world.mcp_url, buyer.api_key) as client:
            return await client.call_tool(
                "weather_forecast", {"city": "Paris", "units": "metric", "sandbox": True}
            )

    result = run(scenario())
    assert not result.is_error, result.content
    out = structured(result)
    assert out["status"] == 200
    assert out["provenance"]["service_id"] == listing["id"]
    payment = out["payment"]
    assert payment["amount"] == "2000" and payment["network"] == "eip155:84532"
    assert payment["sellerReportsSettled"] is True and payment["transaction"].startswith("0x")
    after = balance(world, buyer.wallet), balance(world, world.sandbox_pay_to)
    assert before[0] - after[0] == 2000
    assert after[1] - before[1] == 2000
    receipt = world.chain.rpc.request("eth_getTransactionReceipt", [payment["transaction"]])
    assert int(receipt["status"], 16) == 1


def test_pay_x402_pays_a_v1_open_ecosystem_seller(world: World, buyer: Buyer) -> None:
    url = f"{world.sellers}/facts/v1/fact"
    before = balance(world, buyer.wallet)

    async def scenario() -> types.CallToolResult:
        async with connect(world.mcp_url, buyer.api_key, mode="auto") as client:
            return await client.call_tool(
                "pay_x402", {"url": url, "sandbox": True, "maxAmountUsdc": 0.01}
            )

    result = run(scenario())
    assert not result.is_error, result.content
    out = structured(result)
    assert out["status"] == 200
    assert out["payment"]["x402Version"] == 1 and out["payment"]["sellerReportsSettled"] is True
    assert out["provenance"]["service_id"] is not None  # the full catalog's random_fact listing
    assert before - balance(world, buyer.wallet) == int(out["payment"]["amount"]) == 1000


def test_pay_x402_refuses_above_the_maximum_before_signing(world: World, buyer: Buyer) -> None:
    async def scenario() -> types.CallToolResult:
        async with connect(world.mcp_url, buyer.api_key) as client:
            return await client.call_tool(
                "pay_x402",
                {"url": f"{world.sellers}/facts/v1/fact", "sandbox": True, "maxAmountUsdc": 0.0005},
            )

    result = run(scenario())
    assert result.is_error
    assert structured(result)["error"]["type"] == "price-above-maximum"


def test_allow_pending_is_a_tool_error_naming_the_portal(world: World) -> None:
    buyer = make_buyer(world, allow_facts=False, funds=0)

    async def scenario() -> types.CallToolResult:
        async with connect(world.mcp_url, buyer.api_key) as client:
            return await client.call_tool(
                "pay_x402", {"url": f"{world.sellers}/facts/v1/fact", "sandbox": True}
            )

    result = run(scenario())
    assert result.is_error
    error = structured(result)["error"]
    assert error["type"] == "allow-pending"
    portal = f"{world.settings.resolved_base_url}/portal"
    assert portal in error["whatToDo"]
    assert portal in result.content[0].text  # type: ignore[union-attr]


def test_search_bazaar_against_a_fake_index(world: World, buyer: Buyer) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with connect(world.mcp_url, buyer.api_key) as client:
            found = structured(await client.call_tool("search_bazaar", {"query": "weather"}))
            assert found["method"] == "search"
            cheap = structured(
                await client.call_tool(
                    "search_bazaar",
                    {"query": "weather", "maxPriceUsdc": 0.01, "network": "eip155:8453"},
                )
            )
            return [found, cheap]

    found, cheap = run(scenario())
    assert [r["url"] for r in found["results"]] == [
        "https://api.weather.example/forecast",
        "https://api.weather.example/premium",
    ]
    assert found["results"][0]["priceUsdc"] == "0.001"
    assert found["results"][0]["method"] == "GET"
    assert [r["url"] for r in cheap["results"]] == ["https://api.weather.example/forecast"]
    assert any("/discovery/search?" in c for c in world.bazaar_app.state.calls)


# ---- list_changed (last: it changes the catalog) ----


def test_list_changed_after_a_catalog_import(world: World, buyer: Buyer) -> None:
    document = demo_catalog(world.sellers)
    extra = json.loads(
        json.dumps(next(x for x in document["catalog"] if x["name"] == "weather_forecast"))
    )
    extra.update(
        id="3a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", name="weather_now", path="/v1/now/{city}"
    )

    async def scenario() -> tuple[set[str], bool, bool]:
        seen = asyncio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ServerNotification) and isinstance(
                message, types.ToolListChangedNotification
            ):
                seen.set()
            root = getattr(message, "root", message)
            if isinstance(root, types.ToolListChangedNotification):
                seen.set()

        async with (
            connect(world.mcp_url, buyer.api_key, message_handler=on_message) as legacy,
            connect(world.mcp_url, buyer.api_key, mode="auto") as modern,
            modern.listen(tools_list_changed=True) as sub,
        ):
            init = legacy.session.initialize_result  # type: ignore[attr-defined]
            assert init is None or init.capabilities.tools.list_changed is True
            await legacy.list_tools()
            await asyncio.sleep(0.3)
            await asyncio.to_thread(
                import_catalog, world.runtime.db, world.runtime.clock, {"catalog": [extra]}
            )
            await asyncio.wait_for(seen.wait(), 10)
            modern_seen = False
            async with asyncio.timeout(10):
                async for _event in sub:
                    modern_seen = True
                    break
            names = {t.name for t in (await legacy.list_tools(cache_mode="refresh")).tools}
            return names, seen.is_set(), modern_seen

    names, legacy_seen, modern_seen = run(scenario())
    assert legacy_seen and modern_seen
    assert "weather_now" in names
