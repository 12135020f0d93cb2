"""Batches with their reads made ahead (store/signing_prefetch.py,
store/signing_postgres_async.py): what is read for a batch, how its statements answer, and on
PostgreSQL the batches that run on the event loop — caps exact when they race, the loop free
while one waits for a lock, and a read not made ahead sending the batch to the threads."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from conftest import new_account, signature_body
from paysign.errors import SpendCapExceeded
from paysign.policy.caps import Caps, windows_at
from paysign.policy.decide import Grant, PolicySettings
from paysign.policy.rules import Rule
from paysign.policy.seller import seller_location
from paysign.protocol import PreparedPayment
from paysign.services import policy
from paysign.services.signing import SigningDeps, by_api_key, signing_committer, signing_work
from paysign.store import policy_repo, repositories
from paysign.store.repositories import KeyHolder
from paysign.store.signing_batch import FirstRead, ReadAhead, SpendTotal
from paysign.store.signing_prefetch import (
    NotPrefetched,
    PayerReads,
    PlannedRead,
    PrefetchedStatements,
    planned_reads,
)
from paysign.store.signing_store import signing_store_for
from read_ahead_support import burst, prefetching_deps, set_caps, spent_today, work

NOW = 1_790_000_000
DAY, MONTH = windows_at(NOW)


def holder(account_id: str = "acct-1") -> KeyHolder:
    policy = PolicySettings.defaults()
    return KeyHolder("key-1", account_id, "wallet-1", "0x" + "11" * 20, b"sealed", None, policy)


# --- what is read for a batch ---


def test_one_read_per_payer_and_moment_with_every_host_and_the_windows() -> None:
    live = ReadAhead(("b.example",), (DAY, MONTH))
    reads = [
        FirstRead(b"k1", NOW, ReadAhead(("a.example", "example"), None)),  # a sandbox payment
        FirstRead(b"k1", NOW, live),
        FirstRead(b"k2", NOW, ReadAhead()),  # a body that did not parse
        FirstRead(b"k1", NOW + 1, ReadAhead(("a.example",), None)),
        FirstRead(b"k1", NOW, ReadAhead(("a.example",), (DAY, MONTH))),
    ]
    assert planned_reads(reads) == [
        PlannedRead(b"k1", NOW, ("a.example", "example", "b.example"), (DAY, MONTH)),
        PlannedRead(b"k2", NOW, (), None),
        PlannedRead(b"k1", NOW + 1, ("a.example",), None),
    ]


# --- how the statements answer ---


def statements(spent: tuple[int, int] | None = (100, 1_000)) -> PrefetchedStatements:
    plan = PlannedRead(b"k1", NOW, ("a.example", "b.example"), (DAY, MONTH))
    grants = [
        Grant("allow", Rule("a.example", "/")),
        Grant("deny", Rule("b.example", "/admin")),
    ]
    return PrefetchedStatements([PayerReads(plan, holder(), grants, spent)])


def test_reads_are_answered_from_what_was_read_for_the_hosts_asked() -> None:
    found = statements()
    got, grants, spent = found.first_reads(b"k1", NOW, ReadAhead(("b.example",), (DAY, MONTH)))
    assert got == holder()
    assert [g.rule.host for g in grants] == ["b.example"]
    assert spent == (100, 1_000)
    # Without windows in the request's read-ahead, none are reported (as the threads do).
    assert found.first_reads(b"k1", NOW, ReadAhead(("a.example",)))[2] is None
    assert [g.rule.host for g in found.grants("acct-1", ["a.example"])] == ["a.example"]
    assert found.key_holder(b"k1", NOW) == holder()
    assert found.writes.calls == []


@pytest.mark.parametrize(
    "read",
    [
        lambda s: s.first_reads(b"k1", NOW, ReadAhead(("c.example",))),
        lambda s: s.grants("acct-1", ["a.example", "c.example"]),
        lambda s: s.grants("acct-2", ["a.example"]),
        lambda s: s.key_holder(b"k9", NOW),
        lambda s: s.key_holder(b"k1", NOW + 1),
        lambda s: s.account_holder("acct-1"),
        lambda s: s.lock_hour("acct-1", DAY),
        lambda s: s.lock_seller_windows("acct-1", Rule("a.example", "/"), DAY, MONTH),
        lambda s: s.lock_pending("acct-1"),
        lambda s: s.lock_windows("acct-1", *windows_at(NOW + 40 * 86_400)),
    ],
    ids=[
        "host",
        "hosts",
        "account",
        "key",
        "moment",
        "by-account",
        "hour",
        "budget",
        "queue",
        "windows",
    ],
)
def test_a_read_not_made_ahead_is_refused_and_writes_nothing(read: Any) -> None:
    found = statements()
    with pytest.raises(NotPrefetched):
        read(found)
    assert found.writes.calls == []


def test_a_reservation_is_checked_against_the_locked_windows_and_written_later() -> None:
    found = statements(spent=(100, 1_000))
    caps = Caps(per_payment=None, daily=150, monthly=None)
    assert found.reserve(SpendTotal("acct-1", DAY, MONTH, caps, 51)) is None
    assert found.writes.calls == []  # refused: nothing added
    assert found.reserve(SpendTotal("acct-1", DAY, MONTH, caps, 50)) == (150, 1_050)
    [(many, statement, params)] = found.writes.calls
    assert not many and "spend_windows" in statement and params["amount"] == 50


# --- on PostgreSQL ---


@pytest.fixture
def deps(runtime, signing_store) -> SigningDeps:
    return prefetching_deps(runtime, signing_store)


def test_batches_racing_on_one_account_from_two_stores_never_pass_its_cap(
    deps, runtime, account
) -> None:
    set_caps(runtime, account, daily=25 * 10_000, monthly=None)
    other_store = signing_store_for(runtime.db)
    other = SigningDeps(other_store, runtime.vault, runtime.clock, runtime.registry)
    committers = [signing_committer(deps), signing_committer(other)]

    async def race() -> list[object]:
        return await asyncio.gather(
            *(committers[i % 2].run(work(d, account)) for i, d in enumerate([deps, other] * 30))
        )

    try:
        outcomes = asyncio.run(race())
        stores = [deps.store.prefetching, other_store.prefetching]
        assert all(s is not None and s.committed > 0 and s.given_up == 0 for s in stores)
    finally:
        other_store.close()
    signed = [o for o in outcomes if isinstance(o, PreparedPayment)]
    assert len(signed) == 25
    assert all(isinstance(o, SpendCapExceeded) for o in outcomes if o not in signed)
    assert spent_today(runtime, account) == 25 * 10_000


def test_the_event_loop_runs_on_while_a_batch_waits_for_a_lock(deps, runtime, account) -> None:
    committer = signing_committer(deps)
    assert isinstance(asyncio.run(committer.run(work(deps, account))), PreparedPayment)
    conninfo, options = runtime.db.psycopg_connect_args()
    with psycopg.connect(conninfo, **options) as holder_of_lock:
        holder_of_lock.execute(
            "SELECT spent FROM spend_windows WHERE account_id = %s FOR UPDATE",
            (account["account_id"],),
        )

        async def scenario() -> tuple[int, object]:
            payment = asyncio.ensure_future(committer.run(work(deps, account)))
            ticks = 0
            for _ in range(30):
                await asyncio.sleep(0.01)
                ticks += 1
            assert not payment.done()  # still waiting for the row
            await asyncio.get_running_loop().run_in_executor(None, holder_of_lock.rollback)
            return ticks, await payment

        ticks, outcome = asyncio.run(scenario())
    assert ticks == 30
    assert isinstance(outcome, PreparedPayment)
    assert deps.store.prefetching.committed == 2
    assert spent_today(runtime, account) == 2 * 10_000


def test_an_hourly_cap_is_read_ahead_and_holds(deps, runtime) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, hourly=7 * 10_000, daily=None, monthly=None)
    outcomes = burst(deps, account, 20)
    assert deps.store.prefetching.given_up == 0
    assert sum(isinstance(o, PreparedPayment) for o in outcomes) == 7
    assert all(
        isinstance(o, SpendCapExceeded) and o.extensions["cap"] == "hourly"
        for o in outcomes
        if not isinstance(o, PreparedPayment)
    )


def test_a_budget_on_an_allow_rule_is_read_ahead_and_holds(deps, runtime) -> None:
    account = new_account(runtime)
    document = policy.get_policy(runtime.db, email=account["email"])
    document["allow"] = [
        {"seller": "api.example.com", "daily": 7 * 10_000},
        {"seller": "api.example.com/other", "monthly": 1},  # on the host, not this path
    ]
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)
    outcomes = burst(deps, account, 20)
    assert deps.store.prefetching.given_up == 0
    assert sum(isinstance(o, PreparedPayment) for o in outcomes) == 7
    refused = [o for o in outcomes if not isinstance(o, PreparedPayment)]
    assert all(isinstance(o, SpendCapExceeded) for o in refused)


def test_a_seller_queued_for_approval_sends_the_batch_to_the_threads(deps, runtime) -> None:
    account = new_account(runtime)  # may pay api.example.com only: others wait for approval
    committer = signing_committer(deps)
    bodies = [
        signature_body(seller_url=f"https://seller{i % 3}.example.net/v1") for i in range(6)
    ] + [signature_body() for _ in range(6)]

    async def together() -> list[object]:
        works = [
            signing_work(deps, by_api_key(account["api_key"]), body, sandbox=False)
            for body in bodies
        ]
        return await asyncio.gather(*(committer.run(w) for w in works))

    outcomes = asyncio.run(together())
    assert deps.store.prefetching.given_up > 0  # the approvals queue is not read ahead
    assert [type(o).__name__ for o in outcomes] == ["AllowPending"] * 6 + ["PreparedPayment"] * 6
    with runtime.db.read() as conn:
        refusals = list(policy_repo.refusals_of(conn, account["account_id"]))
        waiting = policy_repo.pending_of(conn, account["account_id"])
    assert len(refusals) == 6  # once each: the batch given up left nothing behind
    assert sorted((p.host, p.refused_count) for p in waiting) == [
        (f"seller{i}.example.net", 2) for i in range(3)
    ]
    assert spent_today(runtime, account) == 6 * 10_000


def test_a_batch_stores_each_signature_exactly_as_recorded(deps, runtime) -> None:
    account = new_account(runtime)
    committer = signing_committer(deps)
    url = "https://api.example.com/v1/caf\u00e9/it's/\u6771\u4eac"  # escaped in the JSON

    async def together() -> list[object]:
        bodies = [signature_body(seller_url=url)] * 3
        bodies.append(signature_body(amount="1"))
        works = [
            signing_work(deps, by_api_key(account["api_key"]), body, sandbox=False)
            for body in bodies
        ]
        return await asyncio.gather(*(committer.run(w) for w in works))

    outcomes = asyncio.run(together())
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    with runtime.db.read() as conn:
        stored = {r.nonce: r for r in repositories.signatures_of(conn, account["account_id"])}
    assert set(stored) == {o.nonce for o in outcomes if isinstance(o, PreparedPayment)}
    for outcome in outcomes:
        assert isinstance(outcome, PreparedPayment)
        record = stored[outcome.nonce]
        terms = outcome.terms
        assert (record.amount, record.valid_before) == (terms.amount, outcome.valid_before)
        assert record.pay_to == "0x" + terms.pay_to.hex()
        assert (record.asset, record.network) == (terms.token.address_hex, terms.network.caip2)
        assert record.sandbox is False and record.status == "signed"
        assert record.settled_tx is None and record.api_key_id is not None
    paths = sorted(r.seller_path for r in stored.values())
    assert paths == [seller_location(url).path] * 3 + ["/weather"]
