"""The signing path's storage: the fixed SQL of ``signing_sql`` over the raw DB-API connection.

This is the one place that skips SQLAlchemy's statement machinery: building and cache-keying
Core expressions cost ~1 ms per request, forty times the signature. The statements are the
same on SQLite and PostgreSQL; only the parameter style differs. The tables are the ones
declared in ``schema.py`` (migrations own them); ``tests/store`` checks both paths agree.

A transaction serves a whole batch of requests (``group_commit``) through
``signing_batch.BatchTransaction``: the key + wallet + policy row and the candidate rules are
read once, an account's day and month windows are locked once and its caps checked against
them, and the records and the spend total are written together before the commit, the total
by one update the database guards with the caps — so concurrent payments can never sum past
a cap.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from operator import attrgetter
from typing import Any, Protocol

from paysign.policy.caps import Caps, Window
from paysign.policy.decide import Grant
from paysign.policy.rules import Rule
from paysign.store import signing_sql as sql
from paysign.store.database import SQLITE_BUSY_TIMEOUT_MS, Database
from paysign.store.pending_queue import PendingEntry, PendingStatements, PostgresPendingStatements
from paysign.store.policy_repo import RefusalRecord, settings_from_values
from paysign.store.repositories import SIGNATURE_COLUMNS, KeyHolder, SignatureRecord
from paysign.store.signing_batch import BatchTransaction, CapHit, SpendTotal

SQLITE_CACHE_KIB = 32 * 1024  # page cache of the signing connection
#: PostgreSQL connections per process, and as many threads to use them: a request never waits
#: for a connection while holding a thread, and no more threads than connections contend for
#: the GIL (dozens of threads blocked on a pool cost more CPU than the queries themselves).
SIGNING_CONNECTIONS = 8


class SigningTransaction(Protocol):
    """What a signing request asks of the store, inside a database transaction that the
    requests of one batch share (``signing_batch.BatchTransaction``)."""

    def key_holder(self, key_hash: bytes, now: int) -> KeyHolder | None: ...

    def account_holder(self, account_id: str) -> KeyHolder | None: ...

    def grants(self, account_id: str, hosts: Sequence[str]) -> list[Grant]: ...

    def reserve(
        self, account_id: str, amount: int, day: Window, month: Window, caps: Caps
    ) -> CapHit | None:
        """Add ``amount`` to both windows, or to neither and say which cap refused."""
        ...

    def insert_signature(self, record: SignatureRecord) -> None: ...

    def touch_key(self, key_id: str, now: int) -> None: ...

    def admit_pending(self, entry: PendingEntry, cap: int) -> bool:
        """Queue ``entry`` for approval, unless it is new and ``cap`` sellers wait already."""
        ...

    def record_refusal(self, refusal: RefusalRecord) -> None: ...


class SigningStore(Protocol):
    #: True when calls are short enough to make on the event loop itself (SQLite in-process).
    inline: bool
    #: Where the calls run when they are not inline.
    executor: Executor | None

    def transaction(self) -> AbstractContextManager[SigningTransaction]:
        """Commits when the block ends normally, rolls back when it raises."""
        ...

    def close(self) -> None: ...


def _holder(row: Sequence[Any] | None) -> KeyHolder | None:
    if row is None:
        return None
    return KeyHolder(
        key_id=row[0],
        account_id=row[1],
        last_used_at=row[2],
        wallet_id=row[3],
        wallet_address=row[4],
        sealed_wallet_key=bytes(row[5]),
        policy=settings_from_values(row[6:13]),
    )


#: A record's values in ``SIGNATURE_COLUMNS`` order: the one plain tuple per signature that
#: every way of inserting it sends (positional parameters, a ``COPY`` row).
_signature_row: Callable[[SignatureRecord], tuple[Any, ...]] = attrgetter(*SIGNATURE_COLUMNS)


def _spend_params(total: SpendTotal) -> dict[str, Any]:
    return {
        "account_id": total.account_id,
        "day_start": total.day.start,
        "month_start": total.month.start,
        "amount": total.amount,
        "daily_cap": total.caps.daily,
        "monthly_cap": total.caps.monthly,
    }


def _refusal_params(refusal: RefusalRecord) -> dict[str, Any]:
    return {
        "account_id": refusal.account_id,
        "api_key_id": refusal.api_key_id,
        "seller_host": refusal.seller_host,
        "seller_path": refusal.seller_path,
        "network": refusal.network,
        "amount": refusal.amount,
        "sandbox": refusal.sandbox,
        "reason": refusal.reason,
        "rule": refusal.rule,
        "detail": refusal.detail[:4000],
        "created_at": refusal.created_at,
    }


class SqlStatements(PendingStatements):
    """``SigningStatements`` over one DB-API cursor; ``sql`` adapts the parameter style."""

    def __init__(self, cursor: Any, sql: Callable[[str], str]) -> None:
        self._cur = cursor
        self._sql = sql

    def key_holder(self, key_hash: bytes, now: int) -> KeyHolder | None:
        self._cur.execute(self._sql(sql.KEY_HOLDER), {"key_hash": key_hash, "now": now})
        return _holder(self._cur.fetchone())

    def account_holder(self, account_id: str) -> KeyHolder | None:
        self._cur.execute(self._sql(sql.ACCOUNT_HOLDER), {"account_id": account_id})
        return _holder(self._cur.fetchone())

    def grants(self, account_id: str, hosts: Sequence[str]) -> list[Grant]:
        names = {f"h{i}": host for i, host in enumerate(hosts)}
        self._cur.execute(
            self._sql(sql.grants_sql(len(hosts))), {"account_id": account_id, **names}
        )
        return [Grant(kind, Rule(host, path)) for kind, host, path in self._cur.fetchall()]

    def reserve(self, total: SpendTotal) -> tuple[int, int] | None:
        params = _spend_params(total)
        self._cur.execute(self._sql(sql.RESERVE), params)
        after = {name: int(value) for name, value in self._cur.fetchall()}
        if len(after) == 2:
            return after["daily"], after["monthly"]
        for name in after:  # the other window refused: give this one back
            start = total.day.start if name == "daily" else total.month.start
            back = {"account_id": total.account_id, "window": name, "start": start}
            self._cur.execute(self._sql(sql.UNRESERVE), {**back, "amount": total.amount})
        return None

    def lock_windows(self, account_id: str, day: Window, month: Window) -> tuple[int, int]:
        params = {"account_id": account_id, "day_start": day.start, "month_start": month.start}
        self._cur.execute(self._sql(sql.LOCK_WINDOWS), params)
        spent = {name: int(value) for name, value in self._cur.fetchall()}
        return spent["daily"], spent["monthly"]

    def add_spend(self, total: SpendTotal) -> bool:
        self._cur.execute(self._sql(sql.ADD_SPEND), _spend_params(total))
        return bool(self._cur.rowcount == 2)

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None:
        self._many(sql.INSERT_SIGNATURE, [_signature_row(r) for r in records])

    def touch_keys(self, last_used: Sequence[tuple[str, int]]) -> None:
        params = [{"key_id": key_id, "now": now} for key_id, now in last_used]
        self._many(sql.TOUCH_KEY, params)

    def insert_refusals(self, refusals: Sequence[RefusalRecord]) -> None:
        self._many(sql.INSERT_REFUSAL, [_refusal_params(r) for r in refusals])

    def _many(self, statement: str, params: Sequence[dict[str, Any] | tuple[Any, ...]]) -> None:
        # A single row is a plain execute: psycopg sets up a pipeline for executemany.
        if len(params) == 1:
            self._cur.execute(self._sql(statement), params[0])
        else:
            self._cur.executemany(self._sql(statement), params)


class PostgresStatements(PostgresPendingStatements, SqlStatements):
    """On PostgreSQL a batch's signatures arrive by ``COPY``: about 60% of the time
    ``executemany`` takes (measured on batches of 32)."""

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None:
        if len(records) == 1:  # COPY's set-up would cost more than the one row
            super().insert_signatures(records)
            return
        with self._cur.copy(sql.COPY_SIGNATURES) as copy:
            for record in records:
                copy.write_row(_signature_row(record))


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
    def transaction(self) -> Iterator[SigningTransaction]:
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


class PostgresSigningStore:
    """Pooled psycopg connections of its own (``Database.raw_pool``), used from as many
    worker threads of its own."""

    inline = False

    def __init__(self, db: Database, *, connections: int = SIGNING_CONNECTIONS) -> None:
        self.pool = db.raw_pool(connections, name="paysign-sign")
        self._threads = ThreadPoolExecutor(connections, thread_name_prefix="paysign-sign")
        self.executor: Executor | None = self._threads
        db.on_dispose(self.close)

    @contextmanager
    def transaction(self) -> Iterator[SigningTransaction]:
        # The connection's block commits when it ends normally and rolls back when it raises;
        # a connection that broke is replaced as it goes back to the pool.
        with self.pool.connection() as conn, conn.cursor() as cur:
            tx = BatchTransaction(PostgresStatements(cur, psycopg_style))
            yield tx
            tx.flush()

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


def signing_store_for(db: Database) -> SigningStore:
    if db.is_sqlite:
        if "///" not in db.url or db.url.endswith(":memory:"):
            raise ValueError("the signing store needs a SQLite file, not an in-memory database")
        return SqliteSigningStore(db.url.split("///", 1)[1])
    return PostgresSigningStore(db)
