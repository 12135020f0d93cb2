"""Engines and transactions for SQLite (embedded default) and PostgreSQL (scale-out).

    >>> db = Database("sqlite://")
    >>> with db.write() as conn:
    ...     _ = conn.exec_driver_sql("select 1")

``write()`` is a short read-write transaction. On SQLite it starts with ``BEGIN IMMEDIATE``
(taking the write lock up front, so two writers never deadlock upgrading a read lock), and
writers queue on the database's lock file (``store/sqlite_lock.py``, shared with the signing
store; a thread lock for an in-memory database) instead of on SQLite's sleeping busy handler. On
PostgreSQL it is a plain transaction; row-level guards in the statements do the rest.

``raw_pool()`` gives PostgreSQL connections beside the engine, for code that skips SQLAlchemy.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
import sqlalchemy as sa
from psycopg_pool import ConnectionPool
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from paysign.datadir import make_private_file, tighten_file
from paysign.store.sqlite_lock import WriterLock

SQLITE_BUSY_TIMEOUT_MS = 10_000

#: Every commit on SQLite is on the disk before it returns (in WAL mode, an fsync of the log per
#: commit; NORMAL would leave the last commits to the next checkpoint, and a power loss or a
#: kernel crash could take back a signature already answered, with its spend). Group commit
#: shares that fsync among the requests of a batch.
SQLITE_SYNCHRONOUS = "FULL"

PgConnection = psycopg.Connection[Any]


def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here (the only PostgreSQL driver installed)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL; ``None`` for an in-memory database or a ``file:`` URI."""
    parsed = sa.engine.make_url(url)
    name = parsed.database or ""
    if not name or name == ":memory:" or parsed.query.get("uri") or name.startswith("file:"):
        return None
    return Path(name)


def _private_sqlite_files(path: Path) -> None:
    """The database file 0600 before SQLite opens it, since SQLite creates the ``-wal`` and
    ``-shm`` files with the database file's mode; those of an earlier, looser one are tightened.
    """
    if not path.parent.is_dir():
        return  # SQLite's own error says it better than a half-made path would
    make_private_file(path)
    for suffix in ("-wal", "-shm", "-journal"):
        tighten_file(path.with_name(path.name + suffix))


class Database:
    def __init__(
        self, url: str, *, pool_size: int = 8, server_prepared_statements: bool = True
    ) -> None:
        """``server_prepared_statements=False`` for a PostgreSQL reached through a pooler in
        transaction mode, where a statement prepared on one server connection is not there
        for the next transaction."""
        self.url = normalise_url(url)
        # psycopg prepares a statement on the server after its fifth run on a connection.
        self._psycopg_options: dict[str, Any] = (
            {} if server_prepared_statements else {"prepare_threshold": None}
        )
        self.is_sqlite = self.url.startswith("sqlite")
        self._write_lock: Callable[[], AbstractContextManager[object]] | None = None
        self._on_dispose: list[Callable[[], None]] = []
        if self.is_sqlite:
            in_memory = self.url in ("sqlite://", "sqlite:///:memory:")
            file = None if in_memory else _sqlite_file(self.url)
            if file is not None:
                _private_sqlite_files(file)
            if file is not None and file.parent.is_dir():
                writers = WriterLock(file)
                self._write_lock = writers.held
                self._on_dispose.append(writers.close)
            else:
                self._write_lock = _thread_lock(threading.Lock())
            self.writer = self._sqlite_engine(begin="BEGIN IMMEDIATE")
            self.reader = self.writer if in_memory else self._sqlite_engine(begin="BEGIN")
        else:
            # Many processes share one PostgreSQL (max_connections is 100 by default): each
            # keeps a small pool and queues on it rather than opening ever more connections.
            self.writer = sa.create_engine(
                self.url,
                pool_size=pool_size,
                max_overflow=pool_size // 2,
                pool_pre_ping=True,
                hide_parameters=True,  # error messages never carry bound values to a log
                connect_args=self._psycopg_options,
            )
            self.reader = self.writer

    def _sqlite_engine(self, *, begin: str) -> Engine:
        memory = self.url in ("sqlite://", "sqlite:///:memory:")
        kwargs: dict[str, Any] = {}
        if memory:
            # One shared connection, so every "engine" sees the same in-memory database.
            kwargs["poolclass"] = sa.pool.StaticPool
            kwargs["connect_args"] = {"check_same_thread": False}
        engine = sa.create_engine(self.url, hide_parameters=True, **kwargs)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy's "begin" event below decide how each transaction starts.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            if not memory:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={SQLITE_SYNCHRONOUS}")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql(begin)

        return engine

    @contextmanager
    def write(self) -> Iterator[Connection]:
        if self._write_lock is None:
            with self.writer.begin() as conn:
                yield conn
            return
        with self._write_lock(), self.writer.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.reader.connect() as conn:
            yield conn
            conn.rollback()

    def raw_pool(
        self, size: int, *, name: str, autocommit: bool = False
    ) -> ConnectionPool[PgConnection]:
        """Up to ``size`` psycopg connections opened as the engine opens its own (same URL,
        options and adapters), on demand, each checked before it is handed out (``_Checkup``).
        The caller closes the pool."""
        conninfo, options = self.psycopg_connect_args()
        checkup = _Checkup()
        pool: ConnectionPool[PgConnection] = ConnectionPool(
            conninfo,
            kwargs={**options, "autocommit": autocommit},
            min_size=0,
            max_size=size,
            check=checkup,
            name=name,
            open=True,
        )
        checkup.pool = pool
        return pool

    def psycopg_connect_args(self) -> tuple[str, dict[str, Any]]:
        """What psycopg needs to connect as the engine does: the conninfo and the options."""
        args, kwargs = self.writer.dialect.create_connect_args(self.writer.url)
        return (args[0] if args else ""), {**kwargs, **self._psycopg_options}

    def on_dispose(self, close: Callable[[], None]) -> None:
        """Run ``close`` when the database is disposed (connections opened beside the engine)."""
        self._on_dispose.append(close)

    def dispose(self) -> None:
        for close in self._on_dispose:
            close()
        self.writer.dispose()
        if self.reader is not self.writer:
            self.reader.dispose()


def _thread_lock(lock: threading.Lock) -> Callable[[], AbstractContextManager[object]]:
    return lambda: lock


class _Checkup:
    """Whether a pooled connection still works, asked each time the pool hands it out and
    mostly answered without a round trip (a ping costs as much as a small query). The server's
    goodbye waits to be read on a connection it hung up (a terminated backend, a restart); one
    idle for ``recheck_seconds`` may have been dropped on the way without a word. Only those
    two are pinged.

    One found dead has the pool check all its idle ones at once: the others likely went with
    it, and psycopg_pool would otherwise try them one by one, sleeping 1 s, 2 s, 4 s... between.
    """

    def __init__(self, recheck_seconds: float = 30.0) -> None:
        self._recheck = recheck_seconds
        # A connection is used for one short transaction: the time since it was last handed
        # out is the time it has sat idle.
        self._handed_out_at: WeakKeyDictionary[PgConnection, float] = WeakKeyDictionary()
        self.pool: ConnectionPool[PgConnection] | None = None

    def __call__(self, conn: PgConnection) -> None:
        now = time.monotonic()
        last = self._handed_out_at.get(conn, now)
        self._handed_out_at[conn] = now
        if now - last < self._recheck and not conn.closed and not _has_input(conn):
            return
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            if self.pool is not None:
                self.pool.check()
            raise


def _has_input(conn: PgConnection) -> bool:
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))
