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

A batch whose reads are all known before it runs takes neither a thread nor a pooled
connection here: ``prefetching`` (``signing_postgres_async``) runs it on the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager, suppress

import psycopg
from psycopg.errors import DivisionByZero
from psycopg_pool import PoolTimeout

from paysign.metrics import observe_pool_wait
from paysign.store.database import Database, PgConnection
from paysign.store.postgres_reachability import (
    CONNECTION_WAIT_SECONDS,
    DatabaseUnreachable,
    Reachability,
)
from paysign.store.postgres_statements import PostgresStatements, psycopg_style
from paysign.store.signing_batch import BatchTransaction, ReservationLost
from paysign.store.signing_postgres_async import TwoPhaseBatches

__all__ = ["SIGNING_CONNECTIONS", "DatabaseUnreachable", "PostgresSigningStore"]

#: PostgreSQL connections per process, and as many threads to use them: a request never waits
#: for a connection while holding a thread, and no more threads than connections contend for
#: the GIL (dozens of threads blocked on a pool cost more CPU than the queries themselves).
SIGNING_CONNECTIONS = 8


class PostgresSigningStore:
    """Pooled psycopg connections of its own (``Database.raw_pool``), used from as many
    worker threads of its own."""

    inline = False
    log_sync = None  # the server's commit is on its disk when it returns

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
        self._reachability = Reachability()
        conninfo, options = db.psycopg_connect_args()
        self.prefetching: TwoPhaseBatches | None = TwoPhaseBatches(
            conninfo, options, self._reachability, connection_wait=connection_wait
        )
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
        self._reachability.check()
        started = time.perf_counter()
        try:
            conn = self.pool.getconn(timeout=self._connection_wait)
        except PoolTimeout:
            self._reachability.lost()
            raise
        observe_pool_wait(time.perf_counter() - started)
        return conn

    def close(self) -> None:
        """Idempotent; waits for the calls under way."""
        self._threads.shutdown(wait=True)
        self.pool.close()
        if self.prefetching is not None:
            self.prefetching.close()


def _roll_back(conn: PgConnection) -> None:
    if conn.closed:
        return
    # The error being raised says what went wrong; a connection too broken to roll back is
    # discarded by the pool.
    with suppress(psycopg.Error):
        conn.rollback()
