"""PostgreSQL batches on the event loop, in two round trips and no thread.

A batch run on the store's threads waits for the server with a thread held, then for the GIL
when the answer comes (under load it waited four times as long as it ran), and the event loop
fights it for the GIL meanwhile. Here a batch is three steps on the event loop:

1. **Read** every payer's holder, rules and spend windows (the hour's too under an hourly
   cap, and their allow rules' budgets) the batch will ask for, in one pipelined round trip
   (``signing_prefetch.planned_reads``, in the batch's lock order), with ``BEGIN``; awaited,
   so the loop serves other requests meanwhile.
2. **Run** the batch's requests against those reads: decisions, reservations, records, all in
   memory, no I/O (``signing_prefetch.PrefetchedStatements``).
3. **Write** what they recorded and ``COMMIT``, in a second round trip (``COPY`` from
   ``COPY_FROM_ROWS`` signatures, as on the threads); awaited.

A batch that asks for a read not made ahead raises ``NotPrefetched`` in step 2; like any other
failure here, it is rolled back and the caller runs it on the threads
(``group_commit.GroupCommitter``), where it gets exactly what it would have got there first.
A database that does not answer holds no thread and never the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg.errors import DivisionByZero
from psycopg.pq import TransactionStatus

from paysign.metrics import observe_pool_wait
from paysign.policy.caps import hour_window
from paysign.policy.decide import Grant
from paysign.policy.rules import Rule
from paysign.store import signing_sql as sql
from paysign.store.postgres_reachability import Reachability
from paysign.store.postgres_statements import psycopg_style
from paysign.store.repositories import KeyHolder
from paysign.store.signing_batch import BatchTransaction, FirstRead, ReservationLost
from paysign.store.signing_prefetch import (
    PayerReads,
    PlannedRead,
    PrefetchedStatements,
    planned_reads,
)
from paysign.store.signing_statements import holder_from_row, holder_with_grants, signature_row

R = TypeVar("R")

#: The cursors of a payer's window locks: day and month, hour, budgets (with hosts only).
Locks = tuple[AsyncCursor[Any], AsyncCursor[Any], AsyncCursor[Any] | None]

#: Connections kept open between batches: one group committer runs one batch at a time.
IDLE_CONNECTIONS = 2


class TwoPhaseBatches:
    """Runs a batch in two round trips on connections of its own, opened on the event loop."""

    def __init__(
        self,
        conninfo: str,
        options: dict[str, Any],
        reachability: Reachability,
        *,
        connection_wait: float,
    ) -> None:
        self._conninfo = conninfo
        self._options = {**options, "autocommit": True}
        self._reachability = reachability
        self._connection_wait = connection_wait
        self._idle: list[AsyncConnection[Any]] = []
        self._closed = False
        #: Batches committed here, and those given up for the threads (what tests watch).
        self.committed = 0
        self.given_up = 0

    async def run(self, reads: Sequence[FirstRead], batch: Callable[[BatchTransaction], R]) -> R:
        """``batch(tx)``'s result once committed; ``reads``: the batch's first reads, in the
        order it runs its requests. Raises (and commits nothing) when anything fails,
        ``NotPrefetched`` included."""
        conn = await self._connection()
        try:
            found = await _read(conn, planned_reads(reads))
            statements = PrefetchedStatements(found)
            tx = BatchTransaction(statements)
            result = batch(tx)
            tx.flush()
            await _write(conn, statements)
        except asyncio.CancelledError:
            conn.pgconn.finish()  # mid-statement: not worth a round trip to clean up
            raise
        except BaseException as exc:
            self.given_up += 1
            await _roll_back(conn)
            if isinstance(exc, DivisionByZero):
                raise ReservationLost("a batch's spend total passed a cap it had checked") from exc
            raise
        finally:
            self._put(conn)
        self.committed += 1
        return result

    async def _connection(self) -> AsyncConnection[Any]:
        self._reachability.check()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                observe_pool_wait(0.0)
                return conn
        started = time.perf_counter()
        try:
            conn = await asyncio.wait_for(
                AsyncConnection.connect(self._conninfo, **self._options), self._connection_wait
            )
        except (TimeoutError, psycopg.OperationalError):
            self._reachability.lost()
            raise
        observe_pool_wait(time.perf_counter() - started)
        return conn

    def _put(self, conn: AsyncConnection[Any]) -> None:
        idle = conn.info.transaction_status == TransactionStatus.IDLE
        if self._closed or not idle or len(self._idle) >= IDLE_CONNECTIONS:
            conn.pgconn.finish()
        elif not conn.closed:
            self._idle.append(conn)

    @property
    def idle_connections(self) -> tuple[AsyncConnection[Any], ...]:
        return tuple(self._idle)

    def close(self) -> None:
        """Closes the idle connections (a batch under way closes its own when it ends)."""
        self._closed = True
        for conn in self._idle:
            conn.pgconn.finish()
        self._idle = []


async def _read(conn: AsyncConnection[Any], plans: Sequence[PlannedRead]) -> list[PayerReads]:
    """``BEGIN`` and every plan's statements sent together, then their results: one round
    trip. The windows are locked in ``plans``' order."""
    sent: list[tuple[PlannedRead, AsyncCursor[Any], Locks | None]] = []
    async with conn.pipeline():
        await conn.execute("BEGIN")
        for plan in plans:
            holders = conn.cursor()
            params: dict[str, Any] = {"key_hash": plan.key_hash, "now": plan.now}
            if plan.hosts:
                names = {f"h{i}": host for i, host in enumerate(plan.hosts)}
                statement = sql.key_holder_with_grants_sql(len(plan.hosts))
                await holders.execute(psycopg_style(statement), {**params, **names})
            else:
                await holders.execute(psycopg_style(sql.KEY_HOLDER), params)
            locks = None
            if plan.windows is not None:
                locks = await _send_locks(conn, plan, params)
            sent.append((plan, holders, locks))
        found = []
        for plan, holder_cursor, locks in sent:
            rows = await holder_cursor.fetchall()
            if plan.hosts:
                holder, grants = holder_with_grants(rows)
            else:
                holder, grants = holder_from_row(rows[0] if rows else None), []
            if locks is None:
                found.append(PayerReads(plan, holder, grants, None))
            else:
                found.append(await _locked(plan, holder, grants, *locks))
    return found


async def _send_locks(
    conn: AsyncConnection[Any], plan: PlannedRead, params: dict[str, Any]
) -> tuple[AsyncCursor[Any], AsyncCursor[Any], AsyncCursor[Any] | None]:
    """Lock (creating at 0) the payer's spend windows, in the order a reservation locks them:
    the day's and month's, the hour's under an hourly cap, each budgeted allow rule's."""
    assert plan.windows is not None
    day, month = plan.windows
    starts = {"day_start": day.start, "month_start": month.start}
    windows, hour = conn.cursor(), conn.cursor()
    await windows.execute(psycopg_style(sql.LOCK_WINDOWS_OF_KEY), {**params, **starts})
    hour_start = hour_window(plan.now).start
    await hour.execute(psycopg_style(sql.LOCK_HOUR_OF_KEY), {**params, "hour_start": hour_start})
    if not plan.hosts:
        return windows, hour, None
    budgets = conn.cursor()
    names = {f"h{i}": host for i, host in enumerate(plan.hosts)}
    statement = psycopg_style(sql.lock_budget_windows_of_key_sql(len(plan.hosts)))
    await budgets.execute(statement, {**params, **starts, **names})
    return windows, hour, budgets


async def _locked(
    plan: PlannedRead,
    holder: KeyHolder | None,
    grants: list[Grant],
    windows: AsyncCursor[Any],
    hour: AsyncCursor[Any],
    budgets: AsyncCursor[Any] | None,
) -> PayerReads:
    by_name = {name: int(value) for name, value in await windows.fetchall()}
    spent = (by_name["daily"], by_name["monthly"]) if len(by_name) == 2 else None
    row = await hour.fetchone()
    hour_spent = None if row is None else int(row[0])
    budgets_spent = None
    if budgets is not None:
        rows: dict[Rule, dict[str, int]] = {}
        for host, path, name, value in await budgets.fetchall():
            rows.setdefault(Rule(host, path), {})[name] = int(value)
        budgets_spent = {rule: (w["daily"], w["monthly"]) for rule, w in rows.items()}
    return PayerReads(plan, holder, grants, spent, hour_spent, budgets_spent)


async def _write(conn: AsyncConnection[Any], statements: PrefetchedStatements) -> None:
    """What the batch recorded, then ``COMMIT``: one round trip (two more with ``COPY``, which
    cannot run in a pipeline)."""
    cur = conn.cursor()
    async with conn.pipeline():
        for many, statement, params in statements.writes.calls:
            if many:
                await cur.executemany(statement, params)
            else:
                await cur.execute(statement, params)
        if not statements.to_copy:
            await cur.execute("COMMIT")
    if statements.to_copy:
        async with cur.copy(sql.COPY_SIGNATURES) as copy:
            for record in statements.to_copy:
                await copy.write_row(signature_row(record))
        await cur.execute("COMMIT")


async def _roll_back(conn: AsyncConnection[Any]) -> None:
    if conn.closed:
        return
    # The error being raised says what went wrong; a connection too broken to roll back is
    # closed as it is put back.
    with suppress(psycopg.Error):
        await conn.execute("ROLLBACK")
