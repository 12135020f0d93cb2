"""Group commit (store/group_commit.py) on SQLite and PostgreSQL: requests that share a
transaction keep their own outcomes, caps hold across a batch, and each batch sees the keys
and policy as they are when it runs."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable

import coincurve
import pytest
import sqlalchemy as sa
from structlog.testing import capture_logs

from conftest import signature_body
from paysign.custody.child_signer import ChildSigner
from paysign.custody.signer_process import SignerProcess
from paysign.errors import NotAuthenticated, PaysignError, SellerDenied, SpendCapExceeded
from paysign.policy.caps import day_window
from paysign.protocol import PreparedPayment
from paysign.protocol.eip712 import checksum_address, keccak256
from paysign.services import keys, policy
from paysign.services.signing import (
    SigningDeps,
    SigningOutcome,
    by_api_key,
    signed_payment,
    signing_committer,
    signing_work,
)
from paysign.services.signing_context import SigningContext
from paysign.store import policy_repo
from paysign.store import repositories as repo
from paysign.store.group_commit import GroupCommitter
from paysign.store.signing_store import signing_store_for

Work = Callable[[SigningContext], SigningOutcome]


@pytest.fixture
def deps(runtime, signing_store) -> SigningDeps:
    return SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)


def work_for(deps: SigningDeps, account, *, amount: int = 10_000) -> Work:
    body = signature_body(amount=str(amount))
    return signing_work(deps, by_api_key(account["api_key"]), body, sandbox=False)


async def run_all(
    committer: GroupCommitter[SigningContext, SigningOutcome], works: list[Work]
) -> list[object]:
    return await asyncio.gather(*(committer.run(w) for w in works), return_exceptions=True)


def ledger(runtime, account) -> tuple[list[repo.SignatureRecord], list[policy_repo.RefusalRecord]]:
    with runtime.db.read() as conn:
        return (
            repo.signatures_of(conn, account["account_id"]),
            list(policy_repo.refusals_of(conn, account["account_id"])),
        )


class Boom(Exception):
    pass


def failing(deps: SigningDeps, account) -> Work:
    """A request that writes (a reservation and its record), then faults."""
    inner = work_for(deps, account)

    def work(context: SigningContext) -> SigningOutcome:
        inner(context)
        raise Boom("the vault is unreachable")

    return work


def test_concurrent_requests_share_transactions_and_all_sign(deps, runtime, account) -> None:
    committer = signing_committer(deps)
    outcomes = asyncio.run(run_all(committer, [work_for(deps, account) for _ in range(40)]))
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    assert len({o.nonce for o in outcomes if isinstance(o, PreparedPayment)}) == 40
    signatures, _ = ledger(runtime, account)
    assert len(signatures) == 40


def test_one_failing_request_fails_alone(deps, runtime, account, clock) -> None:
    committer = signing_committer(deps)
    works = [work_for(deps, account) for _ in range(30)]
    works.insert(7, failing(deps, account))
    outcomes = asyncio.run(run_all(committer, works))
    assert isinstance(outcomes[7], Boom)
    others = outcomes[:7] + outcomes[8:]
    assert all(isinstance(o, PreparedPayment) for o in others)
    signatures, _ = ledger(runtime, account)
    # Nothing of the failed request stays: neither its record nor its reservation.
    assert {s.nonce for s in signatures} == {o.nonce for o in others}  # type: ignore[union-attr]
    with runtime.db.read() as conn:
        assert policy_repo.spent_in(conn, account["account_id"], day_window(clock.now())) == (
            30 * 10_000
        )


def test_a_batch_never_passes_the_cap_and_records_every_refusal(
    deps, runtime, account, clock
) -> None:
    doc = policy.get_policy(runtime.db, email=account["email"])
    doc["caps"].update({"perPayment": None, "daily": 5 * 100_000})
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=doc)
    committer = signing_committer(deps)
    outcomes = asyncio.run(
        run_all(committer, [work_for(deps, account, amount=100_000) for _ in range(20)])
    )
    signed = [o for o in outcomes if isinstance(o, PreparedPayment)]
    refused = [o for o in outcomes if isinstance(o, SpendCapExceeded)]
    assert (len(signed), len(refused)) == (5, 15)
    signatures, refusals = ledger(runtime, account)
    assert (len(signatures), len(refusals)) == (5, 15)


def test_each_seller_of_a_batch_gets_its_own_decision(deps, runtime, account) -> None:
    policy.decide_seller(
        runtime.db, runtime.clock, email=account["email"], seller="blocked.example", kind="deny"
    )
    blocked = signature_body(seller_url="https://blocked.example/quote")
    works = [
        signing_work(deps, by_api_key(account["api_key"]), blocked, sandbox=False)
        if i % 2
        else work_for(deps, account)
        for i in range(10)
    ]
    committer = signing_committer(deps)
    outcomes = committer.run_batch(works)  # one transaction: its context keeps the decision
    assert [type(o) for o in outcomes] == [PreparedPayment, SellerDenied] * 5
    signatures, refusals = ledger(runtime, account)
    assert (len(signatures), len(refusals)) == (5, 5)
    assert {r.seller_host for r in refusals} == {"blocked.example"}


def test_a_key_revoked_between_batches_is_refused_by_the_next(deps, runtime, account) -> None:
    committer = signing_committer(deps)

    async def scenario() -> tuple[list[object], list[object]]:
        first = await run_all(committer, [work_for(deps, account) for _ in range(5)])
        keys.revoke_key(runtime.db, runtime.clock, email=account["email"])
        second = await run_all(committer, [work_for(deps, account) for _ in range(5)])
        return first, second

    first, second = asyncio.run(scenario())
    assert all(isinstance(o, PreparedPayment) for o in first)
    assert all(isinstance(o, NotAuthenticated) for o in second)


def test_outcomes_are_raised_only_once_committed(deps, account) -> None:
    committer = signing_committer(deps)
    outcome = asyncio.run(committer.run(work_for(deps, {**account, "api_key": "psk_" + "x" * 40})))
    assert isinstance(outcome, PaysignError)
    with pytest.raises(NotAuthenticated):
        signed_payment(outcome)


def test_connections_closed_by_the_server_cost_no_request(deps, runtime, account) -> None:
    if runtime.db.is_sqlite:
        pytest.skip("PostgreSQL connections only")
    committer = signing_committer(deps)
    assert all(
        isinstance(o, PreparedPayment)
        for o in asyncio.run(run_all(committer, [work_for(deps, account) for _ in range(8)]))
    )
    pool = deps.store.pool
    idle = [pool.getconn() for _ in range(pool.get_stats()["pool_available"])]
    pids = [conn.info.backend_pid for conn in idle]
    for conn in idle:
        pool.putconn(conn)
    # The batches ran on the event loop, on connections of their own: those too.
    prefetched = [conn.info.backend_pid for conn in deps.store.prefetching.idle_connections]
    assert prefetched
    pids += prefetched
    with runtime.db.write() as conn:
        for pid in pids:  # only this store's own connections
            conn.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")
    with capture_logs() as logged:
        outcomes = asyncio.run(run_all(committer, [work_for(deps, account) for _ in range(8)]))
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    # The batch on the loop met the dead connection, said so, and went to the threads.
    failed = [e for e in logged if e["event"] == "read_ahead_batch_failed"]
    assert failed and all(e["error"] == "OperationalError" for e in failed)


class CountingVault:
    """The real vault, counting the wallet keys it opens."""

    def __init__(self, vault) -> None:
        self.vault = vault
        self.opened = 0

    def seal(self, context: str, secret: bytes):
        return self.vault.seal(context, secret)

    def open(self, context: str, sealed) -> bytes:
        self.opened += 1
        return self.vault.open(context, sealed)


def test_a_wallet_key_is_opened_once_per_transaction_and_never_kept(runtime, account) -> None:
    vault = CountingVault(runtime.vault)
    store = signing_store_for(runtime.db)
    try:
        deps = SigningDeps(store, vault, runtime.clock, runtime.registry)
        committer = signing_committer(deps)
        first = committer.run_batch([work_for(deps, account) for _ in range(10)])
        assert all(isinstance(o, PreparedPayment) for o in first)
        assert vault.opened == 1
        committer.run_batch([work_for(deps, account) for _ in range(10)])
        assert vault.opened == 2  # the next transaction opens it again
    finally:
        store.close()


# --- a completion: what a committed batch still needs before it is answered -----------------


class HeldCompletion:
    """A completion that holds every committed batch until the test releases it."""

    def __init__(self) -> None:
        self.seen: list[object] = []
        self.batches: list[tuple[list[object], Callable[[], None]]] = []

    def ran(self, outcome: object) -> None:
        self.seen.append(outcome)

    def committed(self, outcomes, deliver: Callable[[], None]) -> None:
        self.batches.append((list(outcomes), deliver))

    def committed_outcomes(self) -> list[object]:
        return [o for outcomes, _ in self.batches for o in outcomes]


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(2_000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("timed out")


def key_sorting_before(api_key: str) -> str:
    """A made-up key of the right shape whose hash (its payer's lock order) sorts before
    ``api_key``'s."""
    ours = keys.hash_api_key(api_key)
    return next(
        candidate
        for i in itertools.count()
        if keys.hash_api_key(candidate := f"psk_{'x' * 36}{i:04d}") < ours
    )


def test_requests_are_answered_only_when_the_completion_delivers(deps, runtime, account) -> None:
    held = HeldCompletion()
    committer = signing_committer(deps, held)
    # A key no account has, whose hash sorts before the account's: in its batch it runs
    # first, though it arrived last.
    stranger = {**account, "api_key": key_sorting_before(account["api_key"])}
    works = [work_for(deps, account) for _ in range(12)] + [work_for(deps, stranger)]

    async def scenario() -> list[object]:
        tasks = [asyncio.ensure_future(committer.run(w)) for w in works]
        await until(lambda: len(held.committed_outcomes()) == len(works))
        await asyncio.sleep(0.05)
        assert not any(task.done() for task in tasks)  # committed, not answered yet
        signatures, _ = ledger(runtime, account)
        assert len(signatures) == 12  # ... though recorded
        for _, deliver in held.batches:
            deliver()
        return await asyncio.gather(*tasks)

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, PreparedPayment) for o in outcomes[:12])
    assert isinstance(outcomes[12], NotAuthenticated)
    assert held.committed_outcomes() == outcomes  # each outcome, once, in order
    # Works on the event loop (SQLite's batches, PostgreSQL's with their reads made ahead) show
    # each outcome as it returns, before the commit, in the order they ran: batch by batch
    # (PostgreSQL starts the first request's alone), each in its payers' order.
    index_of = {id(outcome): i for i, outcome in enumerate(outcomes)}

    def payer_order(outcome: object) -> bytes:
        return works[index_of[id(outcome)]].request.load_holder.lock_order

    assert held.seen == [
        outcome for batch, _ in held.batches for outcome in sorted(batch, key=payer_order)
    ]


def test_a_failed_work_is_not_the_completions_and_still_fails(deps, account) -> None:
    held = HeldCompletion()
    committer = signing_committer(deps, held)

    async def scenario() -> list[object]:
        tasks = [asyncio.ensure_future(committer.run(work_for(deps, account))) for _ in range(5)]
        tasks.append(asyncio.ensure_future(committer.run(failing(deps, account))))
        await until(lambda: len(held.committed_outcomes()) == 5)
        for _, deliver in held.batches:
            deliver()
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, PreparedPayment) for o in outcomes[:5])
    assert isinstance(outcomes[5], Boom)
    assert all(isinstance(o, PreparedPayment) for o in held.committed_outcomes())


class BrokenCompletion:
    def ran(self, outcome: object) -> None:
        pass

    def committed(self, outcomes, deliver: Callable[[], None]) -> None:
        raise RuntimeError("the completion has a bug")


def test_a_broken_completion_still_answers_every_request(deps, account) -> None:
    committer = signing_committer(deps, BrokenCompletion())
    outcomes = asyncio.run(run_all(committer, [work_for(deps, account) for _ in range(10)]))
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    assert all(signed_payment(o).header for o in outcomes)  # signed where answered


def signer_of(signature: bytes, digest: bytes) -> str:
    public = coincurve.PublicKey.from_signature_and_message(
        signature[:64] + bytes((signature[64] - 27,)), digest, hasher=None
    )
    return checksum_address(keccak256(public.format(compressed=False)[1:])[12:])


def test_a_signer_process_signs_committed_batches_for_their_wallet(deps, account) -> None:
    signer = SignerProcess()
    deps = dataclasses.replace(deps, wallet_signer=signer.wallet_signer)
    committer = signing_committer(deps, signer)

    async def scenario() -> list[object]:
        warm = await run_all(committer, [work_for(deps, account) for _ in range(4)])
        assert all(isinstance(o, PreparedPayment) for o in warm)
        await until(lambda: signer.ready)  # the first batch started it
        return await run_all(committer, [work_for(deps, account) for _ in range(40)])

    try:
        outcomes = asyncio.run(scenario())
    finally:
        signer.close()
    payments = [o for o in outcomes if isinstance(o, PreparedPayment)]
    assert len(payments) == 40
    # One batch of 40 (SQLite), or a lone first request and a batch of 39 (PostgreSQL, whose
    # first request starts a batch at once): a lone payment is signed where it is answered.
    ahead = [p for p in payments if isinstance(p.signer, ChildSigner)]
    ahead = [p for p in ahead if p.signer.has_signed(p.digest)]
    assert signer.signed_by_child == len(ahead) >= 39
    # What the child made, taken as the answer takes it: a signature by the account's wallet.
    assert {signer_of(p.signer.sign_digest(p.digest), p.digest) for p in ahead} == {
        account["wallet"]
    }
    assert all(signed_payment(p).header for p in payments)


def test_a_batch_runs_its_requests_in_their_payers_order(deps, runtime, account) -> None:
    """Each payment locks its account's spend windows when it runs: in payer order, every
    process locks accounts in one order, and two batches never wait for each other in a
    cycle. The order is the payer's, not arrival's; each request still gets its own answer."""
    from conftest import new_account

    other = new_account(runtime)
    first, second = sorted([account, other], key=lambda a: by_api_key(a["api_key"]).lock_order)
    payers = [second, first] * 4
    works = [work_for(deps, payer, amount=1_000 + n) for n, payer in enumerate(payers)]
    outcomes = signing_committer(deps).run_batch(works)  # one transaction
    assert [o.terms.amount for o in outcomes] == [1_000 + n for n in range(8)]
    query = "SELECT account_id FROM signatures WHERE amount BETWEEN 1000 AND 1007 ORDER BY id"
    with runtime.db.read() as conn:
        rows = conn.execute(sa.text(query)).scalars().all()
    assert rows == [first["account_id"]] * 4 + [second["account_id"]] * 4
