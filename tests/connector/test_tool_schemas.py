"""Tools a model uses right the first time: each listing's tool declares every input (path,
query, header, body field) as a top-level argument with its type; a call shaped as the schema
asks pays the demo's real sellers; a call the schema refuses is refused before anything is
signed, naming the argument; every result is structured as the tool's outputSchema says."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import jsonschema
import mcp_types as types
import pytest

from conftest import LiveServer
from paysign.bootstrap import Runtime
from paysign.services import activity
from paysign.services.catalog import demo_catalog, import_catalog

from .conftest import Buyer, World, connect, make_buyer

#: A call to each demo listing as a model writes it from the listed schema alone.
MODEL_CALLS: dict[str, dict[str, Any]] = {
    "market_quote": {"symbol": "ACME", "sandbox": True},
    "company_filings": {"company": "ACME", "limit": 3, "sandbox": True},
    "weather_forecast": {"city": "Paris", "units": "imperial", "sandbox": True},
    "translate_text": {"text": "hello", "target": "fr", "sandbox": True},
}


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


async def listed(world: World, buyer: Buyer) -> dict[str, types.Tool]:
    async with connect(world.mcp_url, buyer.api_key) as client:
        return {t.name: t for t in (await client.list_tools()).tools}


def test_listing_tools_declare_every_input_with_its_type(world: World, buyer: Buyer) -> None:
    tools = run(listed(world, buyer))
    translate = tools["translate_text"].input_schema
    assert translate["properties"]["text"]["type"] == "string"
    assert "Text to translate" in translate["properties"]["text"]["description"]
    assert sorted(translate["required"]) == ["target", "text"]
    assert translate["additionalProperties"] is False
    assert "body" not in translate["properties"]
    weather = tools["weather_forecast"].input_schema
    assert weather["properties"]["units"]["enum"] == ["metric", "imperial"]
    assert weather["required"] == ["city"]
    assert "X-Sandbox-Mode" not in weather["properties"]  # the sandbox flag sets it
    filings = tools["company_filings"].input_schema
    assert filings["properties"]["limit"] == {
        "type": "integer",
        "description": "How many filings (1-20) (query parameter)",
        "minimum": 1,
        "maximum": 20,
    }
    assert filings["properties"]["sandbox"]["type"] == "boolean"
    for tool in tools.values():
        assert tool.input_schema["additionalProperties"] is False, tool.name
        assert tool.output_schema is not None, tool.name
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)


@pytest.mark.parametrize("name", sorted(MODEL_CALLS))
def test_a_model_shaped_call_pays_each_demo_listing_in_the_sandbox(
    world: World, buyer: Buyer, name: str
) -> None:
    async def scenario() -> tuple[types.CallToolResult, types.Tool]:
        async with connect(world.mcp_url, buyer.api_key) as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == name)
            jsonschema.validate(MODEL_CALLS[name], tool.input_schema)
            # The SDK checks the structured result against the tool's outputSchema.
            return await client.call_tool(name, MODEL_CALLS[name]), tool

    result, tool = run(scenario())
    assert not result.is_error, result.content
    out = result.structured_content
    assert out is not None
    jsonschema.validate(out, tool.output_schema or {})
    assert out["status"] == 200
    assert out["body"]["sandbox"] is True
    payment = out["payment"]
    assert payment["network"] == "eip155:84532" and payment["sellerReportsSettled"] is True
    assert payment["transaction"].startswith("0x") and payment["nonce"].startswith("0x")
    if name == "translate_text":
        assert out["body"]["translatedText"] == "bonjour"
    if name == "weather_forecast":
        assert out["body"]["units"] == "imperial"
    if name == "company_filings":
        assert len(out["body"]["filings"]) == 3


def listing_without_a_sandbox() -> dict[str, Any]:
    """A listing made for the test (every demo listing has a sandbox), at an address nothing
    listens on: a call that reached the seller would fail differently."""
    (filings,) = [
        entry
        for entry in demo_catalog("http://127.0.0.1:9")["catalog"]
        if entry["name"] == "company_filings"
    ]
    entry = copy.deepcopy(filings)
    entry.update(
        id="0d5e7f91-2b4c-4d6e-8f0a-1b3c5d7e9f20", name="archived_filings", sandboxAvailable=False
    )
    entry["inputs"]["header"] = []
    return entry


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_listing_without_a_sandbox_says_so_before_signing(
    runtime: Runtime, live_server: LiveServer, account: dict[str, str]
) -> None:
    import_catalog(runtime.db, runtime.clock, {"catalog": [listing_without_a_sandbox()]})

    async def scenario() -> tuple[types.Tool, list[types.CallToolResult]]:
        async with connect(f"{live_server.url}/mcp", account["api_key"]) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            calls = [
                await client.call_tool("archived_filings", {"company": "ACME", "sandbox": flag})
                for flag in (True, "true")
            ]
            return tools["archived_filings"], calls

    tool, results = run(scenario())
    assert "sandbox" not in tool.input_schema["properties"]  # no sandbox to ask for
    for result in results:
        assert result.is_error
        error = (result.structured_content or {})["error"]
        assert error["type"] == "sandbox-unavailable" and error["argument"] == "sandbox"
    assert activity.activity(runtime.db, email=account["email"]) == []


INVALID_CALLS = [
    ("translate_text", {"text": "hello", "sandbox": True}, "target"),  # required field missing
    ("translate_text", {"body": {"text": "hello", "target": "fr"}, "sandbox": True}, "body"),
    ("translate_text", {"text": 42, "target": "fr", "sandbox": True}, "text"),
    ("weather_forecast", {"city": "Paris", "units": "kelvin", "sandbox": True}, "units"),
    ("weather_forecast", {"city": "Paris", "sandbox": "yes"}, "sandbox"),
    ("company_filings", {"company": "ACME", "limit": "five"}, "limit"),
    ("company_filings", {"company": "ACME", "limit": 50}, "limit"),
    ("pay_x402", {"url": "http://127.0.0.1:1/x", "sandbox": True, "maxPrice": 1}, "maxPrice"),
    ("search_bazaar", {"query": "weather", "limit": "5"}, "limit"),
]


def test_an_invalid_call_names_the_argument_and_writes_nothing(world: World) -> None:
    buyer = make_buyer(world, funds=1_000_000)
    before = world.chain.usdc_balance(bytes.fromhex(buyer.wallet.removeprefix("0x")))

    async def scenario() -> list[types.CallToolResult]:
        async with connect(world.mcp_url, buyer.api_key) as client:
            return [await client.call_tool(name, args) for name, args, _ in INVALID_CALLS]

    results = run(scenario())
    for (name, _, argument), result in zip(INVALID_CALLS, results, strict=True):
        assert result.is_error, (name, argument)
        error = (result.structured_content or {})["error"]
        assert error["type"] == "invalid-arguments", (name, error)
        assert error["argument"] == argument, (name, error)
        assert repr(argument) in error["detail"] or argument in error["detail"]
        assert error["humanMustAct"] is False and error["retryCanHelp"] is False
    assert activity.activity(world.runtime.db, email=buyer.email) == []  # no signature, no refusal
    assert world.chain.usdc_balance(bytes.fromhex(buyer.wallet.removeprefix("0x"))) == before


def test_a_refusal_says_whether_a_person_must_act(world: World) -> None:
    buyer = make_buyer(world, allow_facts=False, funds=0)

    async def scenario() -> tuple[types.CallToolResult, types.Tool]:
        async with connect(world.mcp_url, buyer.api_key) as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "pay_x402")
            result = await client.call_tool(
                "pay_x402", {"url": f"{world.sellers}/facts/v1/fact", "sandbox": True}
            )
            return result, tool

    result, tool = run(scenario())
    assert result.is_error
    document = result.structured_content or {}
    jsonschema.validate(document, tool.output_schema or {})
    error = document["error"]
    assert error["type"] == "allow-pending"
    assert error["humanMustAct"] is True and error["retryCanHelp"] is False
