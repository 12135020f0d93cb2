"""The signing store on SQLite, the embedded default: one connection, on the event loop, its
commits flushed to the disk before they are answered (``store.wal_sync``)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import structlog

from paysign.store.database import SQLITE_BUSY_TIMEOUT_MS, SQLITE_SYNCHRONOUS
from paysign.store.signing_batch import BatchTransaction
from paysign.store.sqlite_lock import WriterLock
from paysign.store.unchanged_reads import UnchangedReads, UnchangedReadStatements
from paysign.store.wal_sync import WalSync

SQLITE_CACHE_KIB = 32 * 1024  # page cache of the signing connection
#: The longest wait between two checkpoint attempts while they keep failing.
CHECKPOINT_MAX_BACKOFF_SECONDS = 30.0

log = structlog.get_logger("paysign.store")


class SqliteSigningStore:
    """One connection per process, used under a lock: in-process calls take microseconds,
    so they run on the event loop with no thread hop; other processes' writers queue on the
    database's lock file (``store/sqlite_lock.py``), then on SQLite's (``BEGIN IMMEDIATE``).
    One transaction per request, reads included: one lock cycle.

    ``busy_timeout_ms``: how long SQLite waits for a writer that skips the lock file.
    ``lock_file=False`` leaves all waiting to SQLite's busy handler (a test's control).
    ``log_sync``: what flushes the commits to the disk (one for ``path`` by default)."""

    inline = True
    executor: Executor | None = None
    prefetching = None

    def __init__(
        self,
        path: str,
        *,
        checkpoint_every: float = 1.0,
        checkpoint_connect: Callable[[str], sqlite3.Connection] | None = None,
        busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
        lock_file: bool = True,
        log_sync: WalSync | None = None,
    ) -> None:
        self._writers = WriterLock(Path(path)) if lock_file else None
        if self._writers is not None:
            self._writers.open()
        # The commit writes the log and ``log_sync`` flushes it, so that a batch under load need
        # not hold the event loop for the disk; every other connection flushes in its commit.
        self._conn = _connect(path, busy_timeout_ms, synchronous="NORMAL")
        self.log_sync = log_sync or WalSync(path)
        self._conn.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        # Checkpoints copy the WAL into a database file that grows with the ledger; they run
        # on a thread of their own (PASSIVE: never blocking a writer), not inside a request.
        self._conn.execute("PRAGMA wal_autocheckpoint=0")
        self._unchanged = UnchangedReads()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._checkpoint_connect = checkpoint_connect or _connect
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop,
            args=(path, checkpoint_every),
            name="paysign-wal-checkpoint",
            daemon=True,
        )
        self._checkpointer.start()

    @property
    def checkpointing(self) -> bool:
        """The checkpoint thread is running."""
        return self._checkpointer.is_alive()

    def _checkpoint_loop(self, path: str, every: float) -> None:
        # Nothing may end this loop but close(): without it the WAL grows for good. A failed
        # attempt (a full disk, an I/O error, a broken connection) drops its connection, is
        # logged, and is tried again on a fresh one after a growing pause.
        conn: sqlite3.Connection | None = None
        pause = every
        try:
            while not self._stop.wait(pause):
                try:
                    if conn is None:
                        conn = self._checkpoint_connect(path)
                    self._checkpoint(conn)
                except Exception as exc:
                    _close_quietly(conn)
                    conn = None
                    pause = min(max(pause, every) * 2, max(every, CHECKPOINT_MAX_BACKOFF_SECONDS))
                    log.warning(
                        "wal_checkpoint_failed",
                        error_type=type(exc).__name__,
                        error=str(exc),
                        retry_in_seconds=pause,
                    )
                    continue
                if pause != every:
                    log.info("wal_checkpoint_recovered")
                pause = every
        finally:
            _close_quietly(conn)

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        # The bulk of the copy, beside the writer. Under steady load that never ends the WAL,
        # though: a writer starts it over only when a checkpoint has copied every frame, and
        # frames keep arriving. So the last few are copied with the writer paused
        # (milliseconds), and the next transaction starts the WAL over; otherwise it grows by
        # megabytes a second and every read slows down with it. Other processes need not wait
        # for it (PASSIVE never blocks a writer): the thread lock, not the lock file.
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        with self._lock:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _other_processes_waited_for(self) -> AbstractContextManager[object]:
        # Blocks the event loop while another process writes, just where SQLite's busy handler
        # would block it otherwise: the store is inline by design, and a transaction is short.
        return nullcontext() if self._writers is None else self._writers.held()

    @contextmanager
    def transaction(self) -> Iterator[BatchTransaction]:
        with self._lock, self._other_processes_waited_for():
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            changes = self._conn.total_changes
            try:
                self._unchanged.begin(cur.execute("PRAGMA data_version").fetchone()[0])
                tx = BatchTransaction(UnchangedReadStatements(cur, self._unchanged))
                yield tx
                tx.flush()
                cur.execute("COMMIT")
                self._unchanged.committed()
            except BaseException:
                self._unchanged.clear()
                # SQLite undoes some failed transactions itself (a full disk), and a failed
                # COMMIT may leave one open: roll back only what is open, so the error that
                # matters is the one raised and the next BEGIN finds no transaction.
                if self._conn.in_transaction:
                    cur.execute("ROLLBACK")
                raise
        if self._conn.total_changes != changes:
            self.log_sync.committed()

    def close(self) -> None:
        """Stop the checkpoints and the log's flushes, then close; once, however often called."""
        if self._stop.is_set():
            return
        self.log_sync.close()
        self._stop.set()
        self._checkpointer.join(timeout=5)
        self._conn.close()
        if self._writers is not None:
            self._writers.close()


def _connect(
    path: str,
    busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
    *,
    synchronous: str = SQLITE_SYNCHRONOUS,
) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _close_quietly(conn: sqlite3.Connection | None) -> None:
    """Close ``conn`` if there is one, whatever state a failure left it in."""
    if conn is not None:
        try:
            conn.close()
        except sqlite3.Error:
            log.warning("wal_checkpoint_connection_not_closed")
