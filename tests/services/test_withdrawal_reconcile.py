"""Withdrawals whose submitting request never learned their fate (the process died, or the
chain answered "pending") are settled from the chain: on the real dev chain (anvil), on both
databases, by the use case and by the server's reconciler job."""

from __future__ import annotations

import dataclasses
import secrets
import time
from typing import Any

import pyotp
import pytest

from conftest import FrozenClock, free_port
from paysign.background import start_reconciler
from paysign.bootstrap import Runtime
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.chain.relay import TransferAuthorization, submit_transfer_authorization
from paysign.chain.rpc import Receipt
from paysign.chain.testnet import SandboxChain
from paysign.protocol import address_of, checksum_address, parse_address
from paysign.services import accounts, withdrawals
from paysign.services.portal_deps import PortalDeps, portal_deps
from paysign.services.withdrawal_reconcile import reconcile_withdrawals
from paysign.store import withdrawal_repo
from paysign.store.schema import withdrawals as withdrawals_table

SANDBOX, MAINNET = "eip155:84532", "eip155:8453"
ONE_USDC = 1_000_000
GRACE = 120
WAIT = 30  # seconds; a bound for a hung test, not a timing assertion


class ProcessDied(BaseException):
    """The server stopped between recording the withdrawal and submitting it."""


class DyingRelay:
    """The real sandbox chain, except that the process dies when it would submit the
    transfer: the signed authorization is kept for the test to submit (or not)."""

    def __init__(self, chain: SandboxChain) -> None:
        self.chain = chain
        self.authorizations: list[TransferAuthorization] = []

    @property
    def network(self) -> str:
        return self.chain.network

    @property
    def chain_id(self) -> int:
        return self.chain.chain_id

    @property
    def usdc(self) -> bytes:
        return self.chain.usdc

    def usdc_balance(self, owner: bytes) -> int:
        return self.chain.usdc_balance(owner)

    def block_time(self) -> int:
        return self.chain.block_time()

    def relay_transfer(self, authorization: TransferAuthorization) -> Receipt:
        self.authorizations.append(authorization)
        raise ProcessDied


@pytest.fixture
def sandbox(chained_runtime: Runtime) -> SandboxChain:
    assert chained_runtime.sandbox_chain is not None
    return chained_runtime.sandbox_chain


@pytest.fixture
def holder(chained_runtime: Runtime, sandbox: SandboxChain) -> accounts.CreatedAccount:
    created = accounts.create_account(
        chained_runtime.db,
        chained_runtime.vault,
        chained_runtime.clock,
        email=f"holder-{secrets.token_hex(4)}@example.com",
        password="correct horse battery staple",
    )
    sandbox.send_usdc(parse_address(created.wallet_address), 3 * ONE_USDC)
    return created


@pytest.fixture
def relay(sandbox: SandboxChain) -> DyingRelay:
    return DyingRelay(sandbox)


@pytest.fixture
def deps(chained_runtime: Runtime, relay: DyingRelay) -> PortalDeps:
    # Any RelayChain goes; the field is typed for the one the server builds.
    return dataclasses.replace(portal_deps(chained_runtime), sandbox_chain=relay)  # type: ignore[arg-type]


@pytest.fixture
def sandbox_states(dev_chain: Any) -> Any:
    states = RpcAuthorizationStates({SANDBOX: dev_chain.rpc_url})
    yield states
    states.close()


def interrupted_withdrawal(
    runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount
) -> int:
    """A withdrawal recorded and signed whose process died before submitting it: its id."""
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    clock.advance(30)  # a new authenticator step: its code is unused
    code = str(pyotp.TOTP(holder.totp_secret).at(clock.now()))
    to = checksum_address(address_of(secrets.token_bytes(32)))
    with pytest.raises(ProcessDied):
        withdrawals.withdraw(deps, holder.account_id, SANDBOX, to, "1", code)
    return max(rows(runtime))


def rows(runtime: Runtime) -> dict[int, dict[str, Any]]:
    with runtime.db.read() as conn:
        found = conn.execute(withdrawals_table.select())
        return {row.id: dict(row._mapping) for row in found}


def past_grace(runtime: Runtime) -> None:
    runtime.clock.advance(GRACE + 1)  # type: ignore[attr-defined]


def test_a_mined_transfer_left_submitting_is_sent_with_its_transaction(
    chained_runtime: Runtime,
    deps: PortalDeps,
    holder: accounts.CreatedAccount,
    relay: DyingRelay,
    sandbox: SandboxChain,
    sandbox_states: RpcAuthorizationStates,
) -> None:
    withdrawal = interrupted_withdrawal(chained_runtime, deps, holder)
    [authorization] = relay.authorizations
    assert rows(chained_runtime)[withdrawal]["valid_before"] == authorization.valid_before
    assert sandbox.treasury is not None
    receipt = submit_transfer_authorization(sandbox.treasury, sandbox.usdc, authorization)
    assert rows(chained_runtime)[withdrawal]["status"] == "submitting"

    # Within the grace the request may still be waiting for its answer: left alone.
    early = reconcile_withdrawals(
        chained_runtime.db, chained_runtime.clock, sandbox_states, chained_runtime.registry
    )
    assert (early.sent, rows(chained_runtime)[withdrawal]["status"]) == (0, "submitting")

    past_grace(chained_runtime)
    report = reconcile_withdrawals(
        chained_runtime.db, chained_runtime.clock, sandbox_states, chained_runtime.registry
    )
    assert (report.sent, report.failed, report.interrupted) == (1, 0, False)
    row = rows(chained_runtime)[withdrawal]
    assert (row["status"], row["transaction_hash"]) == ("sent", receipt.transaction_hash.lower())
    again = reconcile_withdrawals(
        chained_runtime.db, chained_runtime.clock, sandbox_states, chained_runtime.registry
    )
    assert (again.sent, again.failed) == (0, 0)


def test_a_never_submitted_withdrawal_fails_once_its_authorization_expired(
    chained_runtime: Runtime,
    deps: PortalDeps,
    holder: accounts.CreatedAccount,
    relay: DyingRelay,
    sandbox: SandboxChain,
    sandbox_states: RpcAuthorizationStates,
) -> None:
    withdrawal = interrupted_withdrawal(chained_runtime, deps, holder)
    [authorization] = relay.authorizations
    balance = sandbox.usdc_balance(authorization.from_)

    # Past the grace but still valid: it may yet be mined, so it stays.
    past_grace(chained_runtime)
    report = reconcile_withdrawals(
        chained_runtime.db, chained_runtime.clock, sandbox_states, chained_runtime.registry
    )
    assert (report.sent, report.failed) == (0, 0)
    assert rows(chained_runtime)[withdrawal]["status"] == "submitting"

    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    clock.current = authorization.valid_before + GRACE  # not yet past validBefore + grace
    report = reconcile_withdrawals(
        chained_runtime.db, clock, sandbox_states, chained_runtime.registry, grace_seconds=GRACE
    )
    assert (report.sent, report.failed) == (0, 0)
    clock.advance(1)
    report = reconcile_withdrawals(
        chained_runtime.db, clock, sandbox_states, chained_runtime.registry, grace_seconds=GRACE
    )
    assert (report.sent, report.failed, report.interrupted) == (0, 1, False)
    row = rows(chained_runtime)[withdrawal]
    assert (row["status"], row["transaction_hash"]) == ("failed", None)
    assert sandbox.usdc_balance(authorization.from_) == balance


def test_a_pending_withdrawal_mined_later_is_sent(
    chained_runtime: Runtime,
    deps: PortalDeps,
    holder: accounts.CreatedAccount,
    relay: DyingRelay,
    sandbox: SandboxChain,
    sandbox_states: RpcAuthorizationStates,
) -> None:
    withdrawal = interrupted_withdrawal(chained_runtime, deps, holder)
    [authorization] = relay.authorizations
    assert sandbox.treasury is not None
    receipt = submit_transfer_authorization(sandbox.treasury, sandbox.usdc, authorization)
    with chained_runtime.db.write() as conn:  # the chain had answered "pending" with this hash
        withdrawal_repo.finish(conn, withdrawal, "pending", receipt.transaction_hash)
    past_grace(chained_runtime)

    report = reconcile_withdrawals(
        chained_runtime.db, chained_runtime.clock, sandbox_states, chained_runtime.registry
    )
    assert report.sent == 1
    row = rows(chained_runtime)[withdrawal]
    assert (row["status"], row["transaction_hash"]) == ("sent", receipt.transaction_hash.lower())


def test_a_chain_down_does_not_hold_another_networks_withdrawals_back(
    chained_runtime: Runtime,
    deps: PortalDeps,
    holder: accounts.CreatedAccount,
    relay: DyingRelay,
    sandbox: SandboxChain,
    dev_chain: Any,
) -> None:
    on_sandbox = interrupted_withdrawal(chained_runtime, deps, holder)
    [authorization] = relay.authorizations
    assert sandbox.treasury is not None
    receipt = submit_transfer_authorization(sandbox.treasury, sandbox.usdc, authorization)
    with chained_runtime.db.write() as conn:  # one on Base whose chain is down
        on_base = withdrawal_repo.record(
            conn,
            account_id=holder.account_id,
            created_at=chained_runtime.clock.now(),
            network=MAINNET,
            sandbox=False,
            from_address=holder.wallet_address,
            to_address=checksum_address(address_of(secrets.token_bytes(32))),
            amount=ONE_USDC,
            nonce=secrets.token_bytes(32),
            valid_before=chained_runtime.clock.now() + withdrawals.VALID_SECONDS,
            fresh_code=True,
        )
    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    clock.advance(withdrawals.VALID_SECONDS + GRACE + 1)  # Base's is past validBefore too

    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    states = RpcAuthorizationStates({MAINNET: down, SANDBOX: dev_chain.rpc_url})
    try:
        report = reconcile_withdrawals(
            chained_runtime.db, clock, states, chained_runtime.registry, grace_seconds=GRACE
        )
    finally:
        states.close()
    assert (report.sent, report.failed, report.interrupted) == (1, 0, True)
    found = rows(chained_runtime)
    assert found[on_base]["status"] == "submitting"  # unknown: never failed for a chain down
    assert (found[on_sandbox]["status"], found[on_sandbox]["transaction_hash"]) == (
        "sent",
        receipt.transaction_hash.lower(),
    )


def test_the_servers_reconciler_settles_withdrawals(
    chained_runtime: Runtime,
    deps: PortalDeps,
    holder: accounts.CreatedAccount,
    relay: DyingRelay,
    sandbox: SandboxChain,
    dev_chain: Any,
) -> None:
    withdrawal = interrupted_withdrawal(chained_runtime, deps, holder)
    [authorization] = relay.authorizations
    assert sandbox.treasury is not None
    receipt = submit_transfer_authorization(sandbox.treasury, sandbox.usdc, authorization)
    past_grace(chained_runtime)
    settings = chained_runtime.settings.model_copy(
        update={"testnet_rpc_url": dev_chain.rpc_url, "reconcile_interval_seconds": 1}
    )
    job = start_reconciler(dataclasses.replace(chained_runtime, settings=settings))
    assert job is not None
    try:
        deadline = time.monotonic() + WAIT
        while (row := rows(chained_runtime)[withdrawal])["status"] != "sent":
            assert time.monotonic() < deadline, row
            time.sleep(0.1)
    finally:
        job.stop()
    assert row["transaction_hash"] == receipt.transaction_hash.lower()
