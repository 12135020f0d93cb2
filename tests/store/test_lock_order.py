"""Two processes' batches lock the accounts' spend windows in one order on PostgreSQL, whatever
their payers: a batch runs its payers by account (OAuth) first, then by key, each in its own
order, and one account can come either way; the windows are locked first, in the order of the
accounts' ids (signing_sql.LOCK_PAYERS_WINDOWS: from store/signing_postgres_async.py on the
event loop, from store/group_commit.py on the threads)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from psycopg import AsyncConnection

from conftest import new_account, signature_body
from paysign.bootstrap import Runtime
from paysign.policy.caps import windows_at
from paysign.services.keys import hash_api_key
from paysign.services.signing import (
    SigningDeps,
    SigningWork,
    by_account,
    signing_committer,
    signing_work,
)
from paysign.store.group_commit import GroupCommitter
from paysign.store.signing_store import signing_store_for
from read_ahead_support import prefetching_deps, signed, spent_today, waiting_for_locks, work

Payer = dict[str, str]


@pytest.fixture(name="stores")
def two_processes(runtime: Runtime) -> Iterator[tuple[SigningDeps, SigningDeps]]:
    """The signing deps of two stores on one database, as two processes have."""
    if runtime.db.is_sqlite:
        pytest.skip("SQLite has one writer at a time: no order to keep")
    one, two = signing_store_for(runtime.db), signing_store_for(runtime.db)
    yield prefetching_deps(runtime, one), prefetching_deps(runtime, two)
    one.close()
    two.close()


@pytest.fixture(name="run_again")
def works_run_again(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The works of every failed batch, as each runs again alone."""
    again: list[Any] = []
    alone = GroupCommitter._alone

    def counted(self: Any, work: Any) -> Any:
        again.append(work)
        return alone(self, work)

    monkeypatch.setattr(GroupCommitter, "_alone", counted)
    return again


def two_payers(runtime: Runtime) -> tuple[Payer, Payer]:
    """Two accounts, the second's key sorting before the first's."""
    while True:
        x, y = new_account(runtime), new_account(runtime)
        if hash_api_key(y["api_key"]) < hash_api_key(x["api_key"]):
            return x, y


def by_oauth(deps: SigningDeps, payer: Payer) -> SigningWork:
    """A payment of 10,000 by ``payer``'s account, as the connector signed in by OAuth asks."""
    body = signature_body(amount="10000")
    return signing_work(deps, by_account(payer["account_id"]), body, sandbox=False)


def held_while_both_start(
    runtime: Runtime,
    held: Payer,
    sooner: tuple[SigningDeps, list[SigningWork]],
    later: tuple[SigningDeps, list[SigningWork]],
) -> list[object]:
    """``sooner``'s works, then ``later``'s, each sent together through its own committer
    (its first work a batch of its own, the rest one batch) while another writer holds
    ``held``'s day window: each batch waits for a lock before it is released."""
    day, _ = windows_at(runtime.clock.now())
    conninfo, options = runtime.db.psycopg_connect_args()

    async def both() -> list[object]:
        holder = await AsyncConnection.connect(conninfo, **options)
        watcher = await AsyncConnection.connect(conninfo, **{**options, "autocommit": True})
        # The row exists before it is locked, and the lock changes nothing in it: once it is
        # let go, the batches take it in the order they asked for it.
        await watcher.execute(
            'INSERT INTO spend_windows (account_id, "window", start, spent)'
            " VALUES (%s, 'daily', %s, 0)",
            (held["account_id"], day.start),
        )
        await holder.execute(
            "SELECT spent FROM spend_windows WHERE account_id = %s AND \"window\" = 'daily'"
            " AND start = %s FOR UPDATE",
            (held["account_id"], day.start),
        )
        futures = []
        for waiting, (deps, works) in enumerate((sooner, later), start=1):
            committer = signing_committer(deps)
            futures += [asyncio.ensure_future(committer.run(w)) for w in works]
            await waiting_for_locks(watcher, waiting)
        await holder.commit()
        outcomes = await asyncio.gather(*futures)
        await holder.close()
        await watcher.close()
        return outcomes

    return asyncio.run(both())


Batches = tuple[tuple[SigningDeps, list[SigningWork]], tuple[SigningDeps, list[SigningWork]]]


def by_key_and_by_oauth(
    one: SigningDeps, two: SigningDeps, x: Payer, y: Payer, alone: list[Payer]
) -> Batches:
    """By key, y then x; with x's OAuth payer first, x then y."""
    return (
        (one, [work(one, alone[0]), work(one, x), work(one, y)]),
        (two, [work(two, alone[1]), by_oauth(two, x), work(two, y)]),
    )


def both_with_oauth(
    one: SigningDeps, two: SigningDeps, x: Payer, y: Payer, alone: list[Payer]
) -> Batches:
    """Each batch its OAuth payer first, then the other account's key: y then x, x then y."""
    return (
        (two, [work(two, alone[0]), by_oauth(two, y), work(two, x)]),
        (one, [work(one, alone[1]), by_oauth(one, x), work(one, y)]),
    )


@pytest.mark.parametrize(
    "batches",
    [
        pytest.param(by_key_and_by_oauth, id="on-the-loop-and-on-the-threads"),
        pytest.param(both_with_oauth, id="both-on-the-threads"),
    ],
)
def test_two_processes_batches_never_wait_on_each_other(
    runtime: Runtime,
    stores: tuple[SigningDeps, SigningDeps],
    run_again: list[Any],
    batches: Callable[..., Batches],
) -> None:
    # Locked as their payers come, each batch would hold one account's windows and wait for
    # the other's: PostgreSQL would fail one of them after a second.
    x, y = two_payers(runtime)
    alone = [new_account(runtime), new_account(runtime)]
    outcomes = held_while_both_start(runtime, y, *batches(*stores, x, y, alone))
    assert signed(outcomes) == 6
    assert all(deps.store.prefetching.given_up == 0 for deps in stores)  # none on the loop
    assert run_again == []  # nor any on the threads failed
    assert spent_today(runtime, x) == spent_today(runtime, y) == 20_000
