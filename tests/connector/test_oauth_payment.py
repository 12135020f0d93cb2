"""An assistant signed in with OAuth (no API key) pays through the connector for its account:
the token's account's source policy applies, and the payment settles on the dev chain."""

from __future__ import annotations

import secrets
import time
from typing import Any

import mcp_types as types

from oauth.conftest import Service, User
from oauth.test_oauth import tokens_for
from paysign.chain.testnet import SandboxChain
from paysign.protocol import parse_address
from paysign.services import accounts, policy
from paysign.store import repositories as repo

from .conftest import World, connect
from .test_connector import run, structured


class WallClock:
    def now(self) -> int:
        return int(time.time())


def test_an_oauth_signed_in_assistant_pays_for_its_account(world: World) -> None:
    rt = world.runtime
    email = f"oauth-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        rt.db, rt.vault, rt.clock, email=email, password="correct horse battery"
    )
    chain: SandboxChain = world.chain
    wallet = parse_address(created.wallet_address)
    chain.send_usdc(wallet, 1_000_000)
    service = Service(world.service, rt, WallClock())  # type: ignore[arg-type]
    _, issued = tokens_for(service, User(email, created.account_id, created.totp_secret))
    token = issued["access_token"]
    url = f"{world.sellers}/facts/v1/fact"  # Open Ecosystem: this account must approve it

    async def pay() -> types.CallToolResult:
        async with connect(world.mcp_url, token, mode="auto") as client:
            arguments: dict[str, Any] = {"url": url, "sandbox": True, "maxAmountUsdc": 0.01}
            return await client.call_tool("pay_x402", arguments)

    pending = run(pay())
    assert pending.is_error and "allow-pending" in str(pending.content)
    policy.decide_seller(rt.db, rt.clock, email=email, seller="127.0.0.1", kind="allow")

    before = chain.usdc_balance(wallet)
    paid = run(pay())
    assert not paid.is_error, paid.content
    payment = structured(paid)["payment"]
    assert payment["sellerReportsSettled"] is True
    assert before - chain.usdc_balance(wallet) == int(payment["amount"]) == 1000
    with rt.db.read() as conn:
        signed = repo.signatures_of(conn, created.account_id)
    assert [(s.amount, s.api_key_id) for s in signed] == [(1000, None)]
