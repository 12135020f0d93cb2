"""Processes writing one SQLite file queue on its lock file (store/sqlite_lock.py), woken when
it is free, instead of sleeping in SQLite's busy handler.

The writers here run with a busy timeout of 0: SQLite gives up at once on a locked file, so a
transaction that was not queued on the lock file fails with ``database is locked``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from paysign.store.database import Database
from paysign.store.signing_sqlite import SqliteSigningStore
from paysign.store.sqlite_lock import WriterLock, writer_lock_path

sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

PROCESSES = 3
TRANSACTIONS = 300
AMOUNT = 7

#: One writer process: opens its own store, says it is ready, waits for the go on stdin, runs
#: its transactions (a reservation and a signature each) and prints what became of them.
WRITER = """
import json, sqlite3, sys
from paysign.policy.caps import Caps, day_window, month_window
from paysign.store.repositories import SignatureRecord
from paysign.store.signing_sqlite import SqliteSigningStore

path, account_id, worker, count, amount, lock_file = sys.argv[1:]
worker, count, amount = int(worker), int(count), int(amount)
now = 1_790_000_000
day, month, caps = day_window(now), month_window(now), Caps(None, None, None)
store = SqliteSigningStore(
    path, busy_timeout_ms=0, checkpoint_every=3600, lock_file=lock_file == "on"
)
print("ready", flush=True)
sys.stdin.readline()
committed = locked = 0
for n in range(count):
    record = SignatureRecord(
        account_id=account_id, api_key_id=None, seller_host="api.example.com",
        seller_path=f"/{worker}/{n}", network="eip155:84532", asset="0x" + "11" * 20,
        pay_to="0x" + "22" * 20, amount=amount,
        nonce=worker.to_bytes(2, "big") + n.to_bytes(30, "big"), valid_before=now + 60,
        sandbox=False, x402_version=2, created_at=now, tier=None, rule=None, status="signed",
    )
    try:
        with store.transaction() as tx:
            assert tx.reserve(account_id, amount, day, month, caps) is None
            tx.insert_signature(record)
        committed += 1
    except sqlite3.OperationalError as exc:
        if "database is locked" not in str(exc):
            raise
        locked += 1
store.close()
print(json.dumps({"committed": committed, "locked": locked}), flush=True)
"""


def run_writers(path: str, account_id: str, *, lock_file: bool) -> list[dict[str, int]]:
    """``PROCESSES`` writer processes on one file, started together; each one's tally."""
    arguments = [str(TRANSACTIONS), str(AMOUNT), "on" if lock_file else "off"]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, path, account_id, str(worker), *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for worker in range(PROCESSES)
    ]
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        for writer in writers:  # every one has its store open before any writes
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        tallies = []
        for writer in writers:
            out, _ = writer.communicate(timeout=240)
            assert writer.returncode == 0
            tallies.append(json.loads(out))
        return tallies
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()


def ledger(db: Database, account_id: str) -> tuple[int, dict[str, int]]:
    """The account's signatures and what its spend windows hold."""
    with db.read() as conn:
        rows = conn.execute(
            sa.text("SELECT count(*) FROM signatures WHERE account_id = :a"), {"a": account_id}
        ).scalar_one()
        windows = conn.execute(
            sa.text('SELECT "window", spent FROM spend_windows WHERE account_id = :a'),
            {"a": account_id},
        )
        return int(rows), {name: int(spent) for name, spent in windows}


def database_path(db: Database) -> str:
    return db.url.removeprefix("sqlite:///")


@sqlite_only
def test_writer_processes_queued_on_the_lock_file_all_commit(runtime, account) -> None:
    tallies = run_writers(database_path(runtime.db), account["account_id"], lock_file=True)
    assert tallies == [{"committed": TRANSACTIONS, "locked": 0}] * PROCESSES
    total = PROCESSES * TRANSACTIONS
    spent = total * AMOUNT
    assert ledger(runtime.db, account["account_id"]) == (total, {"daily": spent, "monthly": spent})


@sqlite_only
def test_without_the_lock_file_the_same_writers_find_the_database_locked(runtime, account) -> None:
    """The control: the test above would pass without the lock file only if the writers never
    overlapped. Whatever failed left nothing behind."""
    tallies = run_writers(database_path(runtime.db), account["account_id"], lock_file=False)
    assert sum(tally["locked"] for tally in tallies) > 0
    assert all(tally["committed"] + tally["locked"] == TRANSACTIONS for tally in tallies)
    committed = sum(tally["committed"] for tally in tallies)
    spent = committed * AMOUNT
    assert ledger(runtime.db, account["account_id"]) == (
        committed,
        {"daily": spent, "monthly": spent},
    )


# --- the lock file ------------------------------------------------------------------------------

#: Tries the lock without waiting, from another process: "free" or "held".
PROBE = """
import fcntl, os, sys
descriptor = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print("held")
else:
    print("free")
"""


def probe(lock: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(lock)], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_signing_store_holds_the_lock_file_for_its_transaction_only(tmp_path: Path) -> None:
    path = tmp_path / "paysign.db"
    lock = writer_lock_path(path)
    store = SqliteSigningStore(str(path))
    try:
        assert lock.name == "paysign.db-writer.lock"
        assert probe(lock) == "free"
        with store.transaction():
            assert probe(lock) == "held"
        assert probe(lock) == "free"
        with pytest.raises(RuntimeError), store.transaction():
            assert probe(lock) == "held"
            raise RuntimeError("rolled back")
        assert probe(lock) == "free"
    finally:
        store.close()


@sqlite_only
def test_database_writes_take_the_same_lock(runtime) -> None:
    db: Database = runtime.db
    lock = writer_lock_path(Path(database_path(db)))
    with db.write() as conn:
        conn.exec_driver_sql("SELECT 1")
        assert probe(lock) == "held"
    assert probe(lock) == "free"
    with db.read():
        assert probe(lock) == "free"


def test_a_write_nested_in_another_of_the_same_process_does_not_wait_for_itself(
    tmp_path: Path,
) -> None:
    """Every handle of a process on one file shares its lock: the inner one is already held."""
    database = tmp_path / "paysign.db"
    outer, inner = WriterLock(database), WriterLock(database)
    try:
        with outer.held():
            with inner.held():
                assert probe(outer.path) == "held"
            assert probe(outer.path) == "held"
        assert probe(outer.path) == "free"
    finally:
        outer.close()
        inner.close()
    with outer.held():  # a closed handle opens the file again
        assert probe(outer.path) == "held"
    outer.close()


def test_the_lock_file_is_private(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        store = SqliteSigningStore(str(tmp_path / "paysign.db"))
    finally:
        os.umask(old_umask)
    store.close()
    assert mode(writer_lock_path(tmp_path / "paysign.db")) == 0o600


def test_a_looser_lock_file_is_tightened(tmp_path: Path) -> None:
    lock = writer_lock_path(tmp_path / "paysign.db")
    lock.touch()
    lock.chmod(0o644)
    store = SqliteSigningStore(str(tmp_path / "paysign.db"))
    store.close()
    assert mode(lock) == 0o600
