"""Test funds on the real dev chain: a mined transfer, once per rolling 24 h, exactly once
under concurrency, and a failed transfer never uses up the window."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest

from paysign.chain.testnet import SandboxChain
from paysign.errors import FaucetRateLimited, SandboxChainUnavailable
from paysign.protocol import parse_address
from paysign.services.faucet import request_test_funds
from paysign.services.signing import SigningDeps, authenticate
from paysign.store.schema import test_fund_grants

TEN_USDC = 10_000_000
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


@pytest.fixture
def holder(chained_runtime, signing_store, account):
    deps = SigningDeps(
        signing_store, chained_runtime.vault, chained_runtime.clock, chained_runtime.registry
    )
    return authenticate(deps, account["api_key"])


def grant(runtime, holder):
    return request_test_funds(
        runtime.db, runtime.clock, runtime.sandbox_chain, holder, amount=TEN_USDC
    )


def grants(runtime) -> int:
    with runtime.db.read() as conn:
        return len(conn.execute(test_fund_grants.select()).all())


def test_grant_is_a_mined_transfer_of_exactly_ten_usdc(chained_runtime, holder) -> None:
    chain: SandboxChain = chained_runtime.sandbox_chain
    wallet = parse_address(holder.wallet_address)
    before = chain.usdc_balance(wallet)
    result = grant(chained_runtime, holder)
    assert (result.network, result.token) == ("eip155:84532", chain.usdc_hex)
    receipt = chain.rpc.request("eth_getTransactionReceipt", [result.transaction_hash])
    assert int(receipt["status"], 16) == 1
    transfers = [log for log in receipt["logs"] if log["topics"][0] == TRANSFER_TOPIC]
    assert len(transfers) == 1
    assert transfers[0]["address"].lower() == chain.usdc_hex.lower()
    assert transfers[0]["topics"][2][-40:] == holder.wallet_address[2:].lower()
    assert int(transfers[0]["data"], 16) == TEN_USDC
    assert chain.usdc_balance(wallet) == before + TEN_USDC


def test_once_per_rolling_day(chained_runtime, holder, clock) -> None:
    grant(chained_runtime, holder)
    clock.advance(24 * 3600 - 10)
    with pytest.raises(FaucetRateLimited) as refused:
        grant(chained_runtime, holder)
    assert refused.value.retry_after == 10
    clock.advance(10)
    grant(chained_runtime, holder)
    assert grants(chained_runtime) == 2


def test_simultaneous_requests_make_exactly_one_transfer(chained_runtime, holder) -> None:
    chain: SandboxChain = chained_runtime.sandbox_chain
    wallet = parse_address(holder.wallet_address)
    before = chain.usdc_balance(wallet)

    def attempt(_: int) -> str:
        try:
            grant(chained_runtime, holder)
            return "granted"
        except FaucetRateLimited:
            return "limited"

    with ThreadPoolExecutor(max_workers=25) as pool:
        outcomes = list(pool.map(attempt, range(50)))
    assert outcomes.count("granted") == 1 and outcomes.count("limited") == 49
    assert chain.usdc_balance(wallet) == before + TEN_USDC
    assert grants(chained_runtime) == 1


def test_chain_down_answers_unavailable_and_keeps_the_window(chained_runtime, holder) -> None:
    dead = SandboxChain(
        "http://127.0.0.1:9",
        usdc=chained_runtime.sandbox_chain.usdc,
        treasury_key=bytes(31) + b"\x01",
        timeout=1,
    )
    down = dataclasses.replace(chained_runtime, sandbox_chain=dead)
    with pytest.raises(SandboxChainUnavailable):
        grant(down, holder)
    assert grants(chained_runtime) == 0
    grant(chained_runtime, holder)  # the window was not used up
    dead.close()


def test_no_sandbox_chain_configured(runtime, signing_store, account) -> None:
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    with pytest.raises(SandboxChainUnavailable):
        request_test_funds(
            runtime.db, runtime.clock, None, authenticate(deps, account["api_key"]), amount=TEN_USDC
        )
