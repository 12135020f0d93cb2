"""The signing store on PostgreSQL: pooled connections (``psycopg_pool``), on threads of its
own; a batch's signatures arrive by ``COPY``."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache

from psycopg_pool import PoolTimeout

from paysign.metrics import observe_pool_wait, pool_timed_out
from paysign.store import signing_sql as sql
from paysign.store.database import Database, PgConnection
from paysign.store.pending_queue import PostgresPendingStatements
from paysign.store.repositories import SignatureRecord
from paysign.store.signing_batch import BatchTransaction
from paysign.store.signing_statements import SqlStatements, signature_row

#: PostgreSQL connections per process, and as many threads to use them: a request never waits
#: for a connection while holding a thread, and no more threads than connections contend for
#: the GIL (dozens of threads blocked on a pool cost more CPU than the queries themselves).
SIGNING_CONNECTIONS = 8


class PostgresStatements(PostgresPendingStatements, SqlStatements):
    """On PostgreSQL a batch's signatures arrive by ``COPY``: about 60% of the time
    ``executemany`` takes (measured on batches of 32)."""

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None:
        if len(records) == 1:  # COPY's set-up would cost more than the one row
            super().insert_signatures(records)
            return
        with self._cur.copy(sql.COPY_SIGNATURES) as copy:
            for record in records:
                copy.write_row(signature_row(record))


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
        self.pool = db.raw_pool(connections, name="paysign-sign")
        self._threads = ThreadPoolExecutor(connections, thread_name_prefix="paysign-sign")
        self.executor: Executor | None = self._threads
        self._connection_wait = connection_wait
        self._unreachable_until = 0.0
        db.on_dispose(self.close)

    @contextmanager
    def transaction(self) -> Iterator[BatchTransaction]:
        conn = self._connection()
        try:
            # The block commits when it ends normally and rolls back when it raises; a
            # connection that broke is replaced as it goes back to the pool.
            with conn, conn.cursor() as cur:
                tx = BatchTransaction(PostgresStatements(cur, psycopg_style))
                yield tx
                tx.flush()
        finally:
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


# The statements' placeholders (``:name``, and ``?`` where a row comes as a tuple) in psycopg's
# spelling; the server receives ``$1``, ``$2``... either way.
_PLACEHOLDER = re.compile(r"(?<![:\w]):(\w+)|\?")


@lru_cache(maxsize=128)
def psycopg_style(statement: str) -> str:
    """``statement`` with psycopg's placeholders (``PostgresStatements`` takes it)."""
    return _PLACEHOLDER.sub(lambda m: "%s" if m[1] is None else f"%({m[1]})s", statement)
