"""A batch over many known payers (store/signing_postgres_async.py): one guard statement for
them all, whatever their number, and their spends in the batch's lock order; a change to any
one payer sends the whole batch back to locked reads, where each gets what it would have got
alone; and two processes paying the same payers in different orders never pass a cap nor wait
on each other in a cycle."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from psycopg import AsyncConnection

from conftest import new_account
from paysign.errors import SpendCapExceeded
from paysign.policy.caps import windows_at
from paysign.protocol import PreparedPayment
from paysign.services.keys import hash_api_key
from paysign.services.signing import SigningDeps, signing_committer
from paysign.store import signing_sql as sql
from paysign.store.postgres_statements import psycopg_style
from read_ahead_support import (
    HOLDER_CHANGES,
    another_process,  # noqa: F401 - the fixture `other`
    pipeline_runs,  # noqa: F401 - the fixture `sent`
    prefetching_deps,
    set_caps,
    signed,
    spent_today,
    waiting_for_locks,
    work,
)

GUARD = psycopg_style(sql.GUARD_HOLDERS_UNCHANGED)
ADD_SPEND = psycopg_style(sql.ADD_SPEND_OR_FAIL)
PAYERS = 6


@pytest.fixture
def deps(runtime: Any, signing_store: Any) -> SigningDeps:
    return prefetching_deps(runtime, signing_store)


@pytest.fixture
def accounts(runtime: Any) -> list[dict[str, str]]:
    return [new_account(runtime) for _ in range(PAYERS)]


def pay_each(deps: SigningDeps, accounts: list[dict[str, str]]) -> list[object]:
    """One payment of 10,000 from each account, sent together through one group committer."""
    committer = signing_committer(deps)

    async def together() -> list[object]:
        return await asyncio.gather(*(committer.run(work(deps, a)) for a in accounts))

    return asyncio.run(together())


def test_a_batch_of_known_payers_sends_one_guard_for_them_all(
    deps: SigningDeps, runtime: Any, accounts: list[dict[str, str]], sent: list[list[str]]
) -> None:
    batches = deps.store.prefetching
    assert signed(pay_each(deps, accounts)) == PAYERS
    before = len(sent)
    assert signed(pay_each(deps, accounts)) == PAYERS
    runs = sent[before:]  # the first payment alone, then the rest together
    assert len(runs) <= 2
    # BEGIN, the guard, each payer's spend, the signatures, COMMIT
    assert all(run[:2] == ["BEGIN", GUARD] and run[-1] == "COMMIT" for run in runs)
    assert all(len(run) == 4 + run.count(ADD_SPEND) for run in runs)
    assert sum(run.count(ADD_SPEND) for run in runs) == PAYERS
    assert batches.committed_on_known == len(runs) and batches.stale == 0
    assert [spent_today(runtime, a) for a in accounts] == [20_000] * PAYERS


# A lowered cap is left out: a payer a cap refused is read with locks until a payment passes.
@pytest.mark.parametrize(
    ("change", "refused_with"),
    [change for change in HOLDER_CHANGES if change.id != "daily-cap-lowered"],
)
def test_one_changed_payer_sends_the_whole_batch_back_to_locked_reads(
    deps: SigningDeps,
    runtime: Any,
    accounts: list[dict[str, str]],
    change: Any,
    refused_with: type[Exception],
) -> None:
    batches = deps.store.prefetching
    assert signed(pay_each(deps, accounts)) == PAYERS
    changed = accounts[PAYERS // 2]
    change(runtime, changed)
    outcomes = pay_each(deps, accounts)
    assert [isinstance(o, refused_with) for o in outcomes] == [a is changed for a in accounts]
    assert batches.stale == 1  # the batch with the changed payer, read again with locks
    assert [spent_today(runtime, a) for a in accounts] == [
        10_000 if a is changed else 20_000 for a in accounts
    ]
    known = batches.committed_on_known
    assert signed(pay_each(deps, accounts)) == PAYERS - 1
    assert batches.committed_on_known > known and batches.stale == 1  # all known again


def test_one_payer_past_a_cap_another_process_reached_sends_the_batch_back(
    deps: SigningDeps, other: SigningDeps, runtime: Any, accounts: list[dict[str, str]]
) -> None:
    capped = accounts[1]
    set_caps(runtime, capped, daily=30_000, monthly=None)
    batches = deps.store.prefetching
    assert signed(pay_each(deps, accounts)) == PAYERS
    assert signed(pay_each(other, [capped, capped])) == 2  # unseen here: at the cap now
    outcomes = pay_each(deps, accounts)
    assert [isinstance(o, SpendCapExceeded) for o in outcomes] == [a is capped for a in accounts]
    assert batches.stale == 1
    assert [spent_today(runtime, a) for a in accounts] == [
        30_000 if a is capped else 20_000 for a in accounts
    ]


def test_two_processes_paying_the_same_payers_in_turn_stop_at_each_cap(
    deps: SigningDeps, other: SigningDeps, runtime: Any, accounts: list[dict[str, str]]
) -> None:
    for account in accounts:
        set_caps(runtime, account, daily=9 * 10_000, monthly=None)
    stores = [deps.store.prefetching, other.store.prefetching]
    assert signed(pay_each(deps, accounts)) == PAYERS
    assert signed(pay_each(other, accounts[::-1])) == PAYERS
    committers = [signing_committer(deps), signing_committer(other)]

    async def race() -> list[object]:
        return await asyncio.gather(
            *(
                committers[turn % 2].run(work((deps, other)[turn % 2], account))
                for turn in range(12)
                for account in (accounts if turn % 2 else accounts[::-1])
            )
        )

    outcomes = asyncio.run(race())
    assert signed(outcomes) == PAYERS * 7
    assert all(
        isinstance(o, SpendCapExceeded) for o in outcomes if not isinstance(o, PreparedPayment)
    )
    assert [spent_today(runtime, a) for a in accounts] == [9 * 10_000] * PAYERS
    assert sum(s.committed_on_known for s in stores) > 0
    assert all(s.given_up == 0 for s in stores)


def keyed_apart(runtime: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Two payers, the one whose key sorts first with the account id that sorts last."""
    while True:
        one, two = new_account(runtime), new_account(runtime)
        by_key = sorted((one, two), key=lambda a: hash_api_key(a["api_key"]))
        if by_key[0]["account_id"] > by_key[1]["account_id"]:
            return by_key[0], by_key[1]


def test_known_payers_windows_are_locked_in_the_order_a_batch_reading_them_locks_them(
    deps: SigningDeps, other: SigningDeps, runtime: Any
) -> None:
    """A batch on known payers (here) and a batch reading the same payers with locks (the other
    process, which has not paid for them yet) both wait for a window another writer holds; once
    it is released, neither may hold a window the other waits for. Locked by account, the
    known payers' would: PostgreSQL then breaks the cycle by failing one of the batches."""
    first, second = keyed_apart(runtime)
    alone = new_account(runtime)  # a committer's first payment goes alone: then the two
    assert signed(pay_each(deps, [alone, first, second])) == 3
    day, _ = windows_at(runtime.clock.now())
    conninfo, options = runtime.db.psycopg_connect_args()

    async def race() -> list[object]:
        holder = await AsyncConnection.connect(conninfo, **options)
        watcher = await AsyncConnection.connect(conninfo, **{**options, "autocommit": True})
        await holder.execute(
            "SELECT spent FROM spend_windows WHERE account_id = %s AND \"window\" = 'daily'"
            " AND start = %s FOR UPDATE",
            (second["account_id"], day.start),
        )
        known, reading = signing_committer(deps), signing_committer(other)
        on_known = [asyncio.ensure_future(known.run(work(deps, a))) for a in (alone, first, second)]
        await waiting_for_locks(watcher, 1)  # the known payers' batch
        on_reads = [
            asyncio.ensure_future(reading.run(work(other, a))) for a in (alone, first, second)
        ]
        await waiting_for_locks(watcher, 2)  # and the one reading them
        await holder.commit()
        outcomes = await asyncio.gather(*on_known, *on_reads)
        await holder.close()
        await watcher.close()
        return outcomes

    assert signed(asyncio.run(race())) == 6
    assert deps.store.prefetching.given_up == 0 and other.store.prefetching.given_up == 0
    assert [spent_today(runtime, a) for a in (alone, first, second)] == [30_000] * 3
