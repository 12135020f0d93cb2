"""PostgreSQL batches on the event loop, in one or two round trips and no thread.

A batch run on the store's threads waits for the server with a thread held, then for the GIL
when the answer comes (under load it waited four times as long as it ran), and the event loop
fights it for the GIL meanwhile. Here a batch is three steps on the event loop:

1. **Read** every payer's holder, rules and spend windows (the hour's too under an hourly
   cap, and their allow rules' budgets) the batch will ask for, with ``BEGIN``, in one round
   trip (``postgres_pipeline``; ``signing_prefetch.planned_reads``, in the batch's lock
   order); awaited, so the loop serves other requests meanwhile.
2. **Run** the batch's requests against those reads: decisions, reservations, records, all in
   memory, no I/O (``signing_prefetch.PrefetchedStatements``).
3. **Write** what they recorded (every signature in one statement) and ``COMMIT``, in a
   second round trip; awaited.

When every payer of the batch is known (``known_payers``: an earlier batch read them), steps 1
and 3 are one: the batch runs on what was read, and its write begins with a guard per payer
that fails unless their key, holder and rules are unchanged. A guard or a cap that fails, or a
cap refusal (made only on locked reads), runs the batch again in the three steps.

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

import orjson
import psycopg
from psycopg import AsyncConnection
from psycopg.errors import DivisionByZero
from psycopg.pq import TransactionStatus

from paysign.metrics import known_payer_batch, observe_pool_wait
from paysign.policy.caps import hour_window
from paysign.policy.rules import Rule
from paysign.store import signing_sql as sql
from paysign.store.known_payers import KnownPayers
from paysign.store.postgres_pipeline import Command, Pipeline, Row
from paysign.store.postgres_reachability import Reachability
from paysign.store.postgres_statements import payers_to_lock, psycopg_style
from paysign.store.read_ahead_hints import ReadAheadHints
from paysign.store.signing_batch import (
    BatchTransaction,
    FirstRead,
    PayerWindows,
    ReservationLost,
)
from paysign.store.signing_prefetch import (
    NotPrefetched,
    PayerReads,
    PlannedRead,
    PrefetchedStatements,
    planned_reads,
)
from paysign.store.signing_statements import holder_from_row, holder_with_grants

R = TypeVar("R")


class _Stale(Exception):
    """A batch run on known payers found one changed: nothing of it was committed."""


#: Connections kept open between batches: one group committer runs one batch at a time.
IDLE_CONNECTIONS = 2


class TwoPhaseBatches:
    """Runs a batch in one or two round trips on connections of its own, opened on the event
    loop."""

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
        # Off behind a pooler in transaction mode (``Database``'s ``prepare_threshold=None``).
        self._prepare = options.get("prepare_threshold", 0) is not None
        self._reachability = reachability
        self._connection_wait = connection_wait
        self._idle: list[Pipeline] = []
        self._hints = ReadAheadHints()
        self._known = KnownPayers()
        self._closed = False
        #: Batches committed here, and those given up for the threads (what tests watch).
        self.committed = 0
        self.given_up = 0
        #: Of those committed, the batches run on known payers in one round trip; and the
        #: tries on known payers that found them changed (and read them again).
        self.committed_on_known = 0
        self.stale = 0

    async def run(self, reads: Sequence[FirstRead], batch: Callable[[BatchTransaction], R]) -> R:
        """``batch(tx)``'s result once committed; ``reads``: the batch's first reads, in the
        order it runs its requests. Raises (and commits nothing) when anything fails,
        ``NotPrefetched`` included."""
        plans = self._hints.apply(planned_reads(reads))
        pipeline = await self._pipeline()
        try:
            known = self._known.reads_for(plans)
            if known is not None:
                try:
                    return await self._attempt(pipeline, known, batch, locked=False)
                except _Stale:
                    self._known.forget(plans)
                    self.stale += 1
                    known_payer_batch("changed")
            found = _payer_reads(plans, await self._read(pipeline, plans))
            self._hints.learn(found)
            return await self._attempt(pipeline, found, batch, locked=True)
        finally:
            self._put(pipeline)

    async def _read(self, pipeline: Pipeline, plans: Sequence[PlannedRead]) -> list[list[Row]]:
        try:
            return await pipeline.run(_read_commands(plans))
        except BaseException as exc:
            await self._failed(pipeline, exc, plans)
            raise

    async def _attempt(
        self,
        pipeline: Pipeline,
        found: Sequence[PayerReads],
        batch: Callable[[BatchTransaction], R],
        *,
        locked: bool,
    ) -> R:
        """``batch`` on ``found``, then its writes and ``COMMIT``: on locked reads, in the
        transaction they began; else in one of its own that first checks every holder is
        unchanged (``_Stale`` when that, or a cap the stale totals let pass, fails it, or when
        a cap refuses a payment on those totals)."""
        statements = PrefetchedStatements(found)
        tx = BatchTransaction(statements)
        plans = [reads.plan for reads in found]
        try:
            result = batch(tx)
            tx.flush()
        except NotPrefetched as exc:
            if not locked:  # nothing was sent
                raise _Stale from exc
            await self._failed(pipeline, exc, plans)
            raise
        except BaseException as exc:
            await self._failed(pipeline, exc, plans, roll_back=locked)
            raise
        if tx.capped and not locked:  # a refusal quotes what was spent: locked reads only
            raise _Stale  # nothing was sent: the writes are only recorded so far
        commands = _write_commands(statements)
        if not locked:
            commands = [Command("BEGIN"), *_guard_commands(found), *commands]
        try:
            await pipeline.run(commands)
        except DivisionByZero as exc:
            await self._failed(pipeline, exc, plans, count=locked)
            if not locked:
                raise _Stale from exc
            raise ReservationLost("a batch's spend total passed a cap it had checked") from exc
        except BaseException as exc:
            await self._failed(pipeline, exc, plans)
            raise
        self._known.remember(statements, capped=tx.capped)
        self.committed += 1
        if not locked:
            self.committed_on_known += 1
            known_payer_batch("one_round_trip")
        return result

    async def _failed(
        self,
        pipeline: Pipeline,
        exc: BaseException,
        plans: Sequence[PlannedRead],
        *,
        count: bool = True,
        roll_back: bool = True,
    ) -> None:
        """Rolls back after ``exc`` (``roll_back``: a transaction was begun); its payers are
        read afresh next time."""
        conn = pipeline.conn
        if isinstance(exc, asyncio.CancelledError):
            conn.pgconn.finish()  # mid-statement: not worth a round trip to clean up
            return
        if count:
            self.given_up += 1
        if isinstance(exc, NotPrefetched):
            self._hints.forget(plans)
        self._known.forget(plans)
        if roll_back:
            await _roll_back(conn)

    async def _pipeline(self) -> Pipeline:
        self._reachability.check()
        while self._idle:
            pipeline = self._idle.pop()
            if not pipeline.conn.closed:
                observe_pool_wait(0.0)
                return pipeline
        started = time.perf_counter()
        try:
            conn = await asyncio.wait_for(
                AsyncConnection.connect(self._conninfo, **self._options), self._connection_wait
            )
        except (TimeoutError, psycopg.OperationalError):
            self._reachability.lost()
            raise
        observe_pool_wait(time.perf_counter() - started)
        return Pipeline(conn, prepare=self._prepare)

    def _put(self, pipeline: Pipeline) -> None:
        conn = pipeline.conn
        idle = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        if self._closed or not idle or len(self._idle) >= IDLE_CONNECTIONS:
            conn.pgconn.finish()
        else:
            self._idle.append(pipeline)

    @property
    def idle_connections(self) -> tuple[AsyncConnection[Any], ...]:
        return tuple(pipeline.conn for pipeline in self._idle)

    def close(self) -> None:
        """Closes the idle connections (a batch under way closes its own when it ends)."""
        self._closed = True
        for pipeline in self._idle:
            pipeline.conn.pgconn.finish()
        self._idle = []


def _read_commands(plans: Sequence[PlannedRead]) -> list[Command]:
    """``BEGIN``, the day's and month's windows of every plan's account locked in the order of
    the accounts' ids (when there are two plans or more), then each plan's holder and, for a
    live payment, its windows' locks: the day's and month's, the hour's under an hourly cap,
    each budgeted allow rule's on the plan's hosts, in the order a reservation locks them."""
    commands = [Command("BEGIN")]
    if _locks_all_first(plans):
        payers = payers_to_lock(
            PayerWindows(plan.key_hash, None, plan.now, plan.windows)
            for plan in plans
            if plan.windows is not None
        )
        commands.append(Command(psycopg_style(sql.LOCK_PAYERS_WINDOWS), {"payers": payers}))
    for plan in plans:
        params: dict[str, Any] = {"key_hash": plan.key_hash, "now": plan.now}
        names = {f"h{i}": host for i, host in enumerate(plan.hosts)}
        holder = psycopg_style(sql.fingerprinted_holder_sql(len(plan.hosts)))
        commands.append(Command(holder, {**params, **names}))
        if plan.windows is None:
            continue
        day, month = plan.windows
        starts = {"day_start": day.start, "month_start": month.start}
        hour_start = hour_window(plan.now).start
        commands.append(Command(psycopg_style(sql.LOCK_WINDOWS_OF_KEY), {**params, **starts}))
        if plan.hour:
            hour = {**params, "hour_start": hour_start}
            commands.append(Command(psycopg_style(sql.LOCK_HOUR_OF_KEY), hour))
        if plan.hosts and plan.budgets:
            budgets = psycopg_style(sql.lock_budget_windows_of_key_sql(len(plan.hosts)))
            commands.append(Command(budgets, {**params, **starts, **names}))
    return commands


def _locks_all_first(plans: Sequence[PlannedRead]) -> bool:
    """Two plans or more reserve (each plan is one payer at one moment)."""
    return sum(plan.windows is not None for plan in plans) > 1


def _payer_reads(plans: Sequence[PlannedRead], rows: list[list[Row]]) -> list[PayerReads]:
    """What ``_read_commands(plans)`` found (``rows``: each command's, ``BEGIN``'s first)."""
    answers = iter(rows[2:] if _locks_all_first(plans) else rows[1:])
    found = []
    for plan in plans:
        holder_rows = next(answers)
        fingerprint = holder_rows[0][0] if holder_rows else None
        holder_rows = [row[1:] for row in holder_rows]
        if plan.hosts:
            holder, grants = holder_with_grants(holder_rows)
        else:
            holder, grants = holder_from_row(holder_rows[0] if holder_rows else None), []
        if plan.windows is None:
            found.append(PayerReads(plan, holder, grants, None, fingerprint=fingerprint))
            continue
        by_name = {name: int(value) for name, value in next(answers)}
        spent = (by_name["daily"], by_name["monthly"]) if len(by_name) == 2 else None
        hour_spent = None
        if plan.hour:
            hour_rows = next(answers)
            hour_spent = int(hour_rows[0][0]) if hour_rows else None
        budgets_spent = None
        if plan.hosts and plan.budgets:
            windows: dict[Rule, dict[str, int]] = {}
            for host, path, name, value in next(answers):
                windows.setdefault(Rule(host, path), {})[name] = int(value)
            budgets_spent = {rule: (w["daily"], w["monthly"]) for rule, w in windows.items()}
        found.append(
            PayerReads(plan, holder, grants, spent, hour_spent, budgets_spent, fingerprint)
        )
    return found


def _guard_commands(found: Sequence[PayerReads]) -> list[Command]:
    """One statement that fails unless, for each key and hosts of ``found``, the key is live
    at the latest moment asked and what was read of its holder and rules is unchanged."""
    latest: dict[tuple[bytes, tuple[str, ...]], PayerReads] = {}
    for reads in found:
        key = (reads.plan.key_hash, reads.plan.hosts)
        if key not in latest or latest[key].plan.now < reads.plan.now:
            latest[key] = reads
    guards = [
        {
            "key_hash": key_hash.hex(),
            "now": reads.plan.now,
            "hosts": hosts,
            "fingerprint": reads.fingerprint.hex() if reads.fingerprint is not None else None,
        }
        for (key_hash, hosts), reads in latest.items()
    ]
    guard = psycopg_style(sql.GUARD_HOLDERS_UNCHANGED)
    return [Command(guard, {"guards": orjson.dumps(guards).decode()})]


def _write_commands(statements: PrefetchedStatements) -> list[Command]:
    """What the batch recorded, then ``COMMIT``."""
    commands: list[Command] = []
    for many, statement, params in statements.writes.calls:
        if many:
            commands.extend(Command(statement, one) for one in params)
        else:
            commands.append(Command(statement, params))
    commands.append(Command("COMMIT"))
    return commands


async def _roll_back(conn: AsyncConnection[Any]) -> None:
    if conn.closed:
        return
    # The error being raised says what went wrong; a connection too broken to roll back is
    # closed as it is put back.
    with suppress(psycopg.Error):
        await conn.execute("ROLLBACK")
