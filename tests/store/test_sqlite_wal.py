"""The signing store's write-ahead log stays bounded under a steady stream of writes.

SQLite starts its WAL over only after a checkpoint has copied every frame back; with writes
arriving all the time, a checkpoint running beside them never gets there, and the log (and
the cost of every read) would grow for as long as the load lasts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import signature_body
from paysign.services.signing import SigningDeps, by_api_key, sign_payment_for
from paysign.store.database import Database
from paysign.store.signing_sqlite import SqliteSigningStore
from paysign.store.wal_sync import WalSync


def test_the_wal_starts_over_under_steady_writes(runtime, account, tmp_path: Path) -> None:
    db: Database = runtime.db
    if not db.is_sqlite:
        pytest.skip("a SQLite log; PostgreSQL manages its own")
    path = db.url.removeprefix("sqlite:///")
    wal = Path(path + "-wal")
    store = SqliteSigningStore(path, checkpoint_every=0.05)
    deps = SigningDeps(store, runtime.vault, runtime.clock, runtime.registry)
    body = signature_body(amount="1")
    try:
        largest = 0
        for _ in range(3_000):
            sign_payment_for(deps, by_api_key(account["api_key"]), body, sandbox=False)
            time.sleep(0.0005)  # what a request spends outside the transaction
            largest = max(largest, wal.stat().st_size if wal.exists() else 0)
    finally:
        store.close()
    # 3,000 transactions write ~50 MB of frames; a log that starts over stays a few MB.
    assert largest < 8 * 1024 * 1024, f"the WAL grew to {largest:,} bytes"


def test_every_sqlite_connection_puts_a_commit_on_the_disk_before_it_returns(
    runtime, tmp_path: Path
) -> None:
    """``synchronous=FULL`` (2): in WAL mode, the log is synced at each commit, so a signature
    answered is in the ledger and the caps after a power loss; NORMAL (1) syncs it only at the
    next checkpoint. The signing connection commits with NORMAL and has its log flushed before
    it answers (``test_wal_sync.py``)."""
    db: Database = runtime.db
    if not db.is_sqlite:
        pytest.skip("PostgreSQL's durability is the server's (fsync, synchronous_commit)")
    path = db.url.removeprefix("sqlite:///")
    store = SqliteSigningStore(path)
    try:
        assert store._conn.execute("PRAGMA synchronous").fetchone() == (1,)
        assert isinstance(store.log_sync, WalSync)
    finally:
        store.close()
    with db.write() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
    with db.read() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
