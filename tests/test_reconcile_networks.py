"""Reconciliation on both networks at once: Base (live) and Base Sepolia, each a real anvil
chain answering ``authorizationState`` (the Base one has the test USDC's code at Circle's
address), over both databases; by the use case and by the server's background job."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest

from anvil_support import base_mainnet_chain
from conftest import free_port, signature_body
from paysign.background import start_reconciler
from paysign.bootstrap import Runtime
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.policy.caps import day_window
from paysign.services import policy
from paysign.services.reconcile import reconcile
from paysign.services.signing import SigningDeps, sign_payment
from paysign.store import policy_repo
from paysign.store import repositories as repo

USDC = 1_000_000
MAINNET, TESTNET = "eip155:8453", "eip155:84532"
WAIT = 30  # seconds; a bound for a hung test, not a timing assertion


@pytest.fixture(scope="module")
def mainnet_chain(dev_chain: Any) -> Iterator[str]:
    with base_mainnet_chain(dev_chain.rpc_url) as url:
        yield url


@pytest.fixture
def capped(runtime: Runtime, account: dict[str, str]) -> dict[str, str]:
    doc = policy.get_policy(runtime.db, email=account["email"])
    doc["caps"] = {"perPayment": None, "daily": 10 * USDC, "monthly": None}
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=doc)
    return account


@pytest.fixture
def signed_on_both(runtime: Runtime, signing_store: Any, capped: dict[str, str]) -> dict[str, str]:
    """One live payment on each network, never settled, then an hour later."""
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    for network in (MAINNET, TESTNET):
        body = signature_body(amount=str(USDC), network=network)
        sign_payment(deps, capped["api_key"], body, sandbox=False)
    runtime.clock.advance(3600)  # type: ignore[attr-defined]
    return capped


def by_network(runtime: Runtime, account: dict[str, str]) -> dict[str, str]:
    with runtime.db.read() as conn:
        return {s.network: s.status for s in repo.signatures_of(conn, account["account_id"])}


def spent_today(runtime: Runtime, account: dict[str, str]) -> int:
    with runtime.db.read() as conn:
        day = day_window(runtime.clock.now() - 3600)
        return policy_repo.spent_in(conn, account["account_id"], day)


def test_both_networks_are_reconciled_in_one_pass(
    runtime: Runtime, signed_on_both: dict[str, str], mainnet_chain: str, dev_chain: Any
) -> None:
    assert spent_today(runtime, signed_on_both) == 2 * USDC
    chain = RpcAuthorizationStates({MAINNET: mainnet_chain, TESTNET: dev_chain.rpc_url})
    try:
        report = reconcile(runtime.db, runtime.clock, chain, grace_seconds=120)
    finally:
        chain.close()
    assert (report.expired, report.released, report.interrupted) == (2, 2 * USDC, False)
    assert by_network(runtime, signed_on_both) == {MAINNET: "expired", TESTNET: "expired"}
    assert spent_today(runtime, signed_on_both) == 0


def test_one_network_down_does_not_hold_the_other_back(
    runtime: Runtime, signed_on_both: dict[str, str], dev_chain: Any
) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    chain = RpcAuthorizationStates({MAINNET: down, TESTNET: dev_chain.rpc_url})
    try:
        report = reconcile(runtime.db, runtime.clock, chain, grace_seconds=120)
    finally:
        chain.close()
    assert (report.expired, report.released, report.interrupted) == (1, USDC, True)
    assert by_network(runtime, signed_on_both) == {MAINNET: "signed", TESTNET: "expired"}
    assert spent_today(runtime, signed_on_both) == USDC  # the live Base payment stays counted


def test_the_servers_reconciler_releases_both_networks(
    runtime: Runtime, signed_on_both: dict[str, str], mainnet_chain: str, dev_chain: Any
) -> None:
    settings = runtime.settings.model_copy(
        update={
            "mainnet_rpc_url": mainnet_chain,
            "testnet_rpc_url": dev_chain.rpc_url,
            "reconcile_interval_seconds": 1,
        }
    )
    job = start_reconciler(dataclasses.replace(runtime, settings=settings))
    assert job is not None
    try:
        deadline = time.monotonic() + WAIT
        while (statuses := by_network(runtime, signed_on_both)) != {
            MAINNET: "expired",
            TESTNET: "expired",
        }:
            assert time.monotonic() < deadline, statuses
            time.sleep(0.1)
    finally:
        job.stop()
    assert spent_today(runtime, signed_on_both) == 0
