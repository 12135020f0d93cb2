"""Engines and transactions for SQLite (embedded default) and PostgreSQL (scale-out).

    >>> db = Database("sqlite://")
    >>> with db.write() as conn:
    ...     _ = conn.exec_driver_sql("select 1")

``write()`` is a short read-write transaction. On SQLite it starts with ``BEGIN IMMEDIATE``
(taking the write lock up front, so two writers never deadlock upgrading a read lock) and
threads of one process queue on a lock instead of on SQLite's sleeping busy handler. On
PostgreSQL it is a plain transaction; row-level guards in the statements do the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from paysign.datadir import make_private_file, tighten_file

SQLITE_BUSY_TIMEOUT_MS = 10_000


def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here (the only PostgreSQL driver installed)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _private_sqlite_files(url: str) -> None:
    """The database file 0600 before SQLite opens it, since SQLite creates the ``-wal`` and
    ``-shm`` files with the database file's mode; those of an earlier, looser one are tightened.
    """
    parsed = sa.engine.make_url(url)
    name = parsed.database or ""
    if not name or name == ":memory:" or parsed.query.get("uri") or name.startswith("file:"):
        return
    path = Path(name)
    if not path.parent.is_dir():
        return  # SQLite's own error says it better than a half-made path would
    make_private_file(path)
    for suffix in ("-wal", "-shm", "-journal"):
        tighten_file(path.with_name(path.name + suffix))


class Database:
    def __init__(self, url: str, *, pool_size: int = 8) -> None:
        self.url = normalise_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        self._write_lock = threading.Lock() if self.is_sqlite else None
        self._on_dispose: list[Callable[[], None]] = []
        if self.is_sqlite:
            in_memory = self.url in ("sqlite://", "sqlite:///:memory:")
            if not in_memory:
                _private_sqlite_files(self.url)
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
            cur.execute("PRAGMA synchronous=NORMAL")
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
        with self._write_lock, self.writer.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.reader.connect() as conn:
            yield conn
            conn.rollback()

    def on_dispose(self, close: Callable[[], None]) -> None:
        """Run ``close`` when the database is disposed (connections opened beside the engine)."""
        self._on_dispose.append(close)

    def dispose(self) -> None:
        for close in self._on_dispose:
            close()
        self.writer.dispose()
        if self.reader is not self.writer:
            self.reader.dispose()
