"""A small pool of raw psycopg connections for the signing path, and the threads that use it.

SQLAlchemy's pool pings every connection at checkout (``pool_pre_ping``): one more round trip
per request. Here a connection is pinged only when it has sat idle for ``recheck_seconds``; a
connection that broke while in use is dropped on return, so at most the requests that were
using it fail, and the next ones get a fresh one.

The pool has as many connections as the signing executor has threads: a request never waits
for a connection while holding a thread, and no more threads than connections contend for the
GIL (dozens of threads blocked on a pool cost more CPU than the queries themselves).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from paysign.store.database import Database

SIGNING_CONNECTIONS = 8


def connector_for(db: Database) -> Callable[[], psycopg.Connection[Any]]:
    """Opens a connection exactly as the engine would (same URL, options and adapters)."""
    engine = db.writer
    args, kwargs = engine.dialect.create_connect_args(engine.url)

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(*args, **kwargs)

    return connect


class ConnectionPool:
    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        size: int = SIGNING_CONNECTIONS,
        *,
        recheck_seconds: float = 30.0,
    ) -> None:
        self._connect = connect
        self._recheck = recheck_seconds
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[tuple[psycopg.Connection[Any], float]] = []
        self._closed = False
        self.size = size
        #: Threads for the signing store's calls, one per connection.
        self.executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="paysign-sign")

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A healthy connection outside any transaction; returned when the block ends."""
        self._slots.acquire()
        try:
            conn = self._checkout()
            try:
                yield conn
            finally:
                self._checkin(conn)
        finally:
            self._slots.release()

    def _checkout(self) -> psycopg.Connection[Any]:
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if conn.closed or conn.broken:
                continue
            if time.monotonic() - since < self._recheck or _alive(conn):
                return conn
            conn.close()
        return self._connect()

    def _checkin(self, conn: psycopg.Connection[Any]) -> None:
        if conn.broken:
            # The server went away (a restart, a terminated backend): the idle ones are likely
            # gone too, so each is pinged before its next use.
            with self._lock:
                self._idle = [(idle, float("-inf")) for idle, _ in self._idle]
        if conn.closed or conn.info.transaction_status is not TransactionStatus.IDLE:
            conn.close()
            return
        with self._lock:
            if not self._closed:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self) -> None:
        """Idempotent; connections in use are closed when they come back."""
        self.executor.shutdown(wait=True)
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


def _alive(conn: psycopg.Connection[Any]) -> bool:
    try:
        conn.execute("SELECT 1")
        conn.rollback()
    except psycopg.Error:
        conn.close()
        return False
    return True
