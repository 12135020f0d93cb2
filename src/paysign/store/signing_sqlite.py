"""The signing store on SQLite, the embedded default: one connection, on the event loop."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager

from paysign.store.database import SQLITE_BUSY_TIMEOUT_MS
from paysign.store.signing_batch import BatchTransaction
from paysign.store.signing_statements import SqlStatements

SQLITE_CACHE_KIB = 32 * 1024  # page cache of the signing connection


class SqliteSigningStore:
    """One connection per process, used under a lock: in-process calls take microseconds,
    so they run on the event loop with no thread hop; other processes wait on SQLite's lock
    (``BEGIN IMMEDIATE``). One transaction per request, reads included: one lock cycle."""

    inline = True
    executor: Executor | None = None

    def __init__(self, path: str, *, checkpoint_every: float = 1.0) -> None:
        self._conn = _connect(path)
        self._conn.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        # Checkpoints copy the WAL into a database file that grows with the ledger; they run
        # on a thread of their own (PASSIVE: never blocking a writer), not inside a request.
        self._conn.execute("PRAGMA wal_autocheckpoint=0")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop,
            args=(path, checkpoint_every),
            name="paysign-wal-checkpoint",
            daemon=True,
        )
        self._checkpointer.start()

    def _checkpoint_loop(self, path: str, every: float) -> None:
        conn = _connect(path)
        try:
            while not self._stop.wait(every):
                # The bulk of the copy, beside the writer. Under steady load that never ends
                # the WAL, though: a writer starts it over only when a checkpoint has copied
                # every frame, and frames keep arriving. So the last few are copied with the
                # writer paused (milliseconds), and the next transaction starts the WAL over;
                # otherwise it grows by megabytes a second and every read slows down with it.
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                with self._lock:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()

    @contextmanager
    def transaction(self) -> Iterator[BatchTransaction]:
        with self._lock:
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                tx = BatchTransaction(SqlStatements(cur, _same))
                yield tx
                tx.flush()
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def close(self) -> None:
        self._stop.set()
        self._checkpointer.join(timeout=5)
        self._conn.close()


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _same(statement: str) -> str:
    return statement
