"""The signing store on PostgreSQL: pooled connections (``psycopg_pool``), on threads of its
own, each transaction one pipeline (psycopg's pipeline mode).

Time on PostgreSQL goes to round trips, not to the statements: each is a wait for the server
and, under load, for the GIL and a core when the answer arrives (a batch's thread waited four
times as long as it ran). In a pipeline, a statement whose result is not needed yet is sent
with the next one that is: BEGIN with the first read, and every write of the batch with the
COMMIT. A request alone takes two round trips (its holder, rules and spend windows; the writes
and the commit). From ``COPY_FROM_ROWS`` signatures a batch sends them by ``COPY`` after the
pipeline instead (COPY cannot run in one): two more round trips, but a third of the CPU per
row, and under load the CPU is what runs out (side by side, 32 clients: +6 to 12% req/s).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.errors import DivisionByZero
from psycopg_pool import PoolTimeout

from paysign.metrics import observe_pool_wait, pool_timed_out
from paysign.store import signing_sql as sql
from paysign.store.database import Database, PgConnection
from paysign.store.pending_queue import PostgresPendingStatements
from paysign.store.repositories import SignatureRecord
from paysign.store.signing_batch import (
    BatchTransaction,
    FirstReads,
    HourTotal,
    ReadAhead,
    ReservationLost,
    SellerTotal,
    SpendTotal,
)
from paysign.store.signing_statements import (
    SqlStatements,
    holder_with_grants,
    hour_spend_params,
    seller_spend_params,
    signature_row,
    spend_params,
)

#: PostgreSQL connections per process, and as many threads to use them: a request never waits
#: for a connection while holding a thread, and no more threads than connections contend for
#: the GIL (dozens of threads blocked on a pool cost more CPU than the queries themselves).
SIGNING_CONNECTIONS = 8


#: From this many signatures in a batch, they go by ``COPY``.
COPY_FROM_ROWS = 4


class PostgresStatements(PostgresPendingStatements, SqlStatements):
    """The statements for a cursor in pipeline mode: nothing waits for a result it does not
    read."""

    def __init__(self, cursor: Any, sql: Callable[[str], str]) -> None:
        super().__init__(cursor, sql)
        self.to_copy: list[SignatureRecord] = []

    def first_reads(self, key_hash: bytes, now: int, ahead: ReadAhead) -> FirstReads:
        """The holder with their rules and, for a live payment, their two spend windows
        locked: two statements, one round trip."""
        if ahead.windows is None:
            return super().first_reads(key_hash, now, ahead)
        day, month = ahead.windows
        with self._cur.connection.cursor() as windows:
            self._send_holder_with_grants(self._cur, key_hash, now, ahead.hosts)
            params = {"key_hash": key_hash, "now": now, "day_start": day.start}
            windows.execute(
                self._sql(sql.LOCK_WINDOWS_OF_KEY), {**params, "month_start": month.start}
            )
            holder, grants = holder_with_grants(self._cur.fetchall())
            spent = {name: int(value) for name, value in windows.fetchall()}
        if holder is None or len(spent) != 2:
            return holder, grants, None
        return holder, grants, (spent["daily"], spent["monthly"])

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None:
        """A few by ``executemany`` in the pipeline; more are kept for ``COPY`` after it
        (``copy_signatures``), at a third of the CPU per row."""
        if len(records) < COPY_FROM_ROWS:
            super().insert_signatures(records)
        else:
            self.to_copy = list(records)

    def copy_signatures(self) -> None:
        with self._cur.copy(sql.COPY_SIGNATURES) as copy:
            for record in self.to_copy:
                copy.write_row(signature_row(record))
        self.to_copy = []

    def add_spend(self, total: SpendTotal) -> bool:
        """Always ``True``: a total the guard refuses fails the transaction instead (see
        ``ADD_SPEND_OR_FAIL``), which ``PostgresSigningStore`` reports as ``ReservationLost``."""
        self._cur.execute(self._sql(sql.ADD_SPEND_OR_FAIL), spend_params(total))
        return True

    def add_hour_spend(self, total: HourTotal) -> bool:
        """Always ``True``, as ``add_spend``."""
        self._cur.execute(self._sql(sql.ADD_HOUR_SPEND_OR_FAIL), hour_spend_params(total))
        return True

    def add_seller_spend(self, total: SellerTotal) -> bool:
        """Always ``True``, as ``add_spend``."""
        self._cur.execute(self._sql(sql.ADD_SELLER_SPEND_OR_FAIL), seller_spend_params(total))
        return True


class DatabaseUnreachable(RuntimeError):
    """PostgreSQL gave the signing store no connection a moment ago; not asked again yet."""


#: How long a transaction waits for a connection (the pool opens one meanwhile if it can).
CONNECTION_WAIT_SECONDS = 5.0
#: After a wait that ended with no connection, transactions fail at once for this long:
#: group commit re-runs a failed batch's requests one by one, and each waiting in turn would
#: keep the last of them for minutes.
UNREACHABLE_BACKOFF_SECONDS = 1.0


class PostgresSigningStore:
    """Pooled psycopg connections of its own (``Database.raw_pool``), used from as many
    worker threads of its own."""

    inline = False

    def __init__(
        self,
        db: Database,
        *,
        connections: int = SIGNING_CONNECTIONS,
        connection_wait: float = CONNECTION_WAIT_SECONDS,
    ) -> None:
        self.pool = db.raw_pool(connections, name="paysign-sign", autocommit=True)
        self._threads = ThreadPoolExecutor(connections, thread_name_prefix="paysign-sign")
        self.executor: Executor | None = self._threads
        self._connection_wait = connection_wait
        self._unreachable_until = 0.0
        db.on_dispose(self.close)

    @contextmanager
    def transaction(self) -> Iterator[BatchTransaction]:
        conn = self._connection()
        try:
            # The connections are in autocommit mode and the transaction is spelled out, so
            # that BEGIN goes with the first read and COMMIT with the writes: the pipeline's
            # end sends them and waits once (psycopg's commit() would wait, then the end
            # again). A COPY can only follow the pipeline, and the COMMIT then follows it.
            with conn.cursor() as cur:
                statements = PostgresStatements(cur, psycopg_style)
                with conn.pipeline():
                    cur.execute("BEGIN")
                    tx = BatchTransaction(statements)
                    yield tx
                    tx.flush()
                    if not statements.to_copy:
                        cur.execute("COMMIT")
                if statements.to_copy:
                    statements.copy_signatures()
                    cur.execute("COMMIT")
        except BaseException as exc:
            _roll_back(conn)
            if isinstance(exc, DivisionByZero):
                raise ReservationLost("a batch's spend total passed a cap it had checked") from exc
            raise
        finally:
            # A connection that broke is replaced as it goes back to the pool.
            self.pool.putconn(conn)

    def _connection(self) -> PgConnection:
        if time.monotonic() < self._unreachable_until:
            raise DatabaseUnreachable("PostgreSQL gave no connection a moment ago")
        started = time.perf_counter()
        try:
            conn = self.pool.getconn(timeout=self._connection_wait)
        except PoolTimeout:
            self._unreachable_until = time.monotonic() + UNREACHABLE_BACKOFF_SECONDS
            pool_timed_out()
            raise
        observe_pool_wait(time.perf_counter() - started)
        return conn

    def close(self) -> None:
        """Idempotent; waits for the calls under way."""
        self._threads.shutdown(wait=True)
        self.pool.close()


def _roll_back(conn: PgConnection) -> None:
    if conn.closed:
        return
    # The error being raised says what went wrong; a connection too broken to roll back is
    # discarded by the pool.
    with suppress(psycopg.Error):
        conn.rollback()


# The statements' placeholders (``:name``, and ``?`` where a row comes as a tuple) in psycopg's
# spelling; the server receives ``$1``, ``$2``... either way.
_PLACEHOLDER = re.compile(r"(?<![:\w]):(\w+)|\?")


@lru_cache(maxsize=128)
def psycopg_style(statement: str) -> str:
    """``statement`` with psycopg's placeholders (``PostgresStatements`` takes it)."""
    return _PLACEHOLDER.sub(lambda m: "%s" if m[1] is None else f"%({m[1]})s", statement)
