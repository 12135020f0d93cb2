"""The Open Ecosystem half offline: ``search_bazaar`` against the demo's own discovery index
(served by the demo sellers at ``/discovery``, as ``paysign demo`` configures it) finds the
demo's Open Ecosystem seller, and the ``pay_x402`` call its result spells out pays it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import mcp_types as types

from paysign.app import create_app

from .conftest import Buyer, Served, World, connect, replace_settings


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


def test_the_demo_index_speaks_the_bazaar_api(world: World) -> None:
    listed = httpx.get(f"{world.sellers}/discovery/resources", params={"type": "http"}).json()
    assert [item["serviceName"] for item in listed["items"]] == ["random_fact"]
    (item,) = listed["items"]
    assert item["resource"] == f"{world.sellers}/facts/v1/fact"
    assert {a["network"] for a in item["accepts"]} == {"base", "base-sepolia"}  # x402 v1 names
    found = httpx.get(f"{world.sellers}/discovery/search", params={"query": "trivia"}).json()
    assert [r["resource"] for r in found["resources"]] == [item["resource"]]
    none = httpx.get(f"{world.sellers}/discovery/search", params={"query": "weather"}).json()
    assert none["resources"] == []  # catalog tools, not Open Ecosystem: not in the index
    assert httpx.get(f"{world.sellers}/discovery/search").status_code == 400


def test_search_bazaar_finds_and_pays_a_demo_seller_offline(world: World, buyer: Buyer) -> None:
    runtime = replace_settings(world.runtime, bazaar_url=world.sellers)

    async def scenario(mcp_url: str) -> tuple[types.CallToolResult, types.CallToolResult]:
        async with connect(mcp_url, buyer.api_key) as client:
            found = await client.call_tool("search_bazaar", {"query": "random fact"})
            assert not found.is_error, found.content
            (result,) = (found.structured_content or {})["results"]
            pay_with = result["payWith"]
            assert pay_with["tool"] == "pay_x402" and pay_with["sandboxOffered"] is True
            arguments = {**pay_with["arguments"], "sandbox": True}
            return found, await client.call_tool(pay_with["tool"], arguments)

    with Served(create_app(runtime)) as server:
        found, paid = run(scenario(f"{server.url}/mcp"))
    result = (found.structured_content or {})["results"][0]
    assert result["url"] == f"{world.sellers}/facts/v1/fact"
    assert result["priceUsdc"] == "0.001"
    assert result["payWith"]["arguments"] == {"url": result["url"], "maxAmountUsdc": 0.001}
    assert not paid.is_error, paid.content
    out = paid.structured_content or {}
    assert out["status"] == 200 and "fact" in out["body"]
    assert out["payment"]["sellerReportsSettled"] is True
    assert out["payment"]["network"] == "base-sepolia"  # an x402 v1 seller names it so
