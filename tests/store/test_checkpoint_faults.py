"""The signing store's WAL checkpoint thread outlives its own failures.

The signing connection never checkpoints (``wal_autocheckpoint=0``): if the checkpoint thread
died, the WAL would grow for as long as the server runs. Here its checkpoints fail for real,
then stop failing, and the thread must log, reopen and catch up: the kernel refusing the
writes into the database file (a file-size limit, in a process of its own), and, through the
store's connection factory, a read-only connection (SQLite's genuine I/O error) or a closed one.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from paysign.store.signing_sqlite import SqliteSigningStore

ROWS = 200  # of 4 KiB each: about 800 KiB of WAL frames for the checkpoint to copy


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    before = structlog.get_config()
    structlog.configure(cache_logger_on_first_use=False)
    try:
        with capture_logs() as captured:
            yield captured
    finally:
        structlog.configure(**before)


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def writer(path: Path) -> sqlite3.Connection:
    """A connection that, like the signing one, leaves every checkpoint to the thread."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE IF NOT EXISTS filler (data BLOB)")
    return conn


def fill(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN")
    for _ in range(ROWS):
        conn.execute("INSERT INTO filler VALUES (randomblob(4096))")
    conn.execute("COMMIT")


class FaultyConnections:
    """Connections for the checkpoint thread: broken ones while ``broken`` is set."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.broken = threading.Event()
        self.broken.set()
        self.opened = 0

    def __call__(self, path: str) -> sqlite3.Connection:
        self.opened += 1
        if not self.broken.is_set():
            return sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        if self.kind == "read-only":
            uri = f"file:{Path(path).resolve()}?mode=ro"
            return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        closed = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        closed.close()
        return closed


@pytest.mark.parametrize("kind", ["read-only", "closed"])
def test_a_failed_checkpoint_is_logged_retried_and_caught_up(
    tmp_path: Path, kind: str, logs: list[dict[str, Any]]
) -> None:
    path = tmp_path / "paysign.db"
    conn = writer(path)
    connections = FaultyConnections(kind)
    store = SqliteSigningStore(str(path), checkpoint_every=0.02, checkpoint_connect=connections)
    try:
        empty_size = path.stat().st_size
        fill(conn)
        wait_for(lambda: sum(e["event"] == "wal_checkpoint_failed" for e in logs) >= 2)
        assert store.checkpointing
        # Nothing was copied back: the frames are all still only in the WAL.
        assert path.stat().st_size == empty_size
        failure = next(e for e in logs if e["event"] == "wal_checkpoint_failed")
        assert failure["log_level"] == "warning"
        assert failure["error_type"] in {"OperationalError", "ProgrammingError"}
        assert failure["retry_in_seconds"] > 0.02
        # Each attempt after a failure is made on a connection of its own.
        assert connections.opened >= 2

        connections.broken.clear()
        wait_for(lambda: path.stat().st_size >= ROWS * 4096)
        assert store.checkpointing
        wait_for(lambda: any(e["event"] == "wal_checkpoint_recovered" for e in logs))

        # Every frame was copied, so the next transaction starts the WAL over: writing as
        # much again leaves the log no larger than it was.
        wal = Path(f"{path}-wal")
        before = wal.stat().st_size
        fill(conn)
        assert wal.stat().st_size <= before
    finally:
        store.close()
        conn.close()
    assert not store.checkpointing


# In a process of its own: a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes the kernel
# refuse every write past 64 KiB, so the checkpoint's copy into the database file fails the
# way a full disk fails it; then the limit is lifted, as when space is freed.
_FILE_SIZE_LIMITED = """
import json, os, resource, signal, sqlite3, sys, time
from structlog.testing import capture_logs
from paysign.store.signing_sqlite import SqliteSigningStore

path = sys.argv[1]
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA wal_autocheckpoint=0")
conn.execute("CREATE TABLE filler (data BLOB)")
conn.execute("BEGIN")
for _ in range(ROWS):
    conn.execute("INSERT INTO filler VALUES (randomblob(4096))")
conn.execute("COMMIT")

def wait_for(predicate):
    deadline = time.monotonic() + 20
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
with capture_logs() as logs:
    store = SqliteSigningStore(path, checkpoint_every=0.02)
    wait_for(lambda: sum(e["event"] == "wal_checkpoint_failed" for e in logs) >= 2)
    limited = {"size": os.path.getsize(path), "alive": store.checkpointing}
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    wait_for(lambda: os.path.getsize(path) >= ROWS * 4096)
    recovered = {"size": os.path.getsize(path), "alive": store.checkpointing}
    store.close()
failures = [e for e in logs if e["event"] == "wal_checkpoint_failed"]
print(json.dumps({"limited": limited, "recovered": recovered, "failure": failures[0]}))
"""


def test_the_checkpoint_outlives_writes_the_kernel_refuses(tmp_path: Path) -> None:
    path = tmp_path / "paysign.db"
    script = _FILE_SIZE_LIMITED.replace("ROWS", str(ROWS))
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["limited"]["alive"] is True
    assert result["limited"]["size"] <= 64 * 1024
    assert result["failure"]["error_type"] == "OperationalError"
    assert result["failure"]["error"] == "disk I/O error"
    assert result["recovered"]["alive"] is True
    assert result["recovered"]["size"] >= ROWS * 4096
