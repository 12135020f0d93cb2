"""``wallet_status``: an assistant asks "how much can you still spend today?" after real
payments to the demo's sellers, and learns which seller waits for the user's approval."""

from __future__ import annotations

import asyncio
from typing import Any

import jsonschema
import mcp_types as types

from paysign.policy.caps import day_window, iso

from .conftest import World, connect, make_buyer


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


def test_wallet_status_after_a_live_payment_and_a_pending_seller(world: World) -> None:
    buyer = make_buyer(world, allow_facts=False, funds=1_500_000)
    facts = f"{world.sellers}/facts/v1/fact"

    async def scenario() -> tuple[list[types.CallToolResult], types.Tool]:
        async with connect(world.mcp_url, buyer.api_key) as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "wallet_status")
            calls = [
                # A new Open Ecosystem seller: waits for the user's approval.
                await client.call_tool("pay_x402", {"url": facts, "sandbox": True}),
                # Live: signed and reserved under the caps; the demo cannot settle on mainnet.
                await client.call_tool("weather_forecast", {"city": "Oslo"}),
                # Sandbox: paid and settled, never counted against the caps.
                await client.call_tool("market_quote", {"symbol": "ACME", "sandbox": True}),
                await client.call_tool("wallet_status", {"seller": facts}),
                await client.call_tool("wallet_status", {}),
            ]
            return calls, tool

    (pending, live, sandboxed, asked, plain), tool = run(scenario())
    assert (pending.structured_content or {})["error"]["type"] == "allow-pending"
    assert (live.structured_content or {})["payment"]["amount"] == "2000"
    assert not sandboxed.is_error, sandboxed.content
    assert not asked.is_error, asked.content
    status = asked.structured_content or {}
    jsonschema.validate(status, tool.output_schema or {})
    caps = {c["cap"]: c for c in status["caps"]}
    assert caps["daily"]["spentUsdc"] == "0.002"
    assert caps["daily"]["remainingUsdc"] == "9.998"
    assert caps["daily"]["resetsAt"] == iso(day_window(world.runtime.clock.now()).resets_at)
    assert caps["perPayment"]["limitUsdc"] == "1"
    assert status["canSpendNowUsdc"] == "1"
    assert status["sellerBudgets"] == {"total": 0, "budgets": []}
    facts_seller = f"{world.sellers_host}/facts/v1/fact"
    assert status["pendingApprovals"] == {"total": 1, "sellers": [facts_seller]}
    assert status["seller"] == {"seller": facts_seller, "pendingApproval": True}
    assert status["sandbox"]["balanceUsdc"] == "1.49"  # 1.5 test USDC less the 0.01 quote
    assert status["apiKeyExpiresAt"] is not None
    assert (plain.structured_content or {})["seller"] is None


def test_wallet_status_refuses_an_unknown_argument(world: World) -> None:
    buyer = make_buyer(world, funds=0)

    async def scenario() -> types.CallToolResult:
        async with connect(world.mcp_url, buyer.api_key) as client:
            return await client.call_tool("wallet_status", {"period": "today"})

    result = run(scenario())
    assert result.is_error
    assert (result.structured_content or {})["error"]["argument"] == "period"
