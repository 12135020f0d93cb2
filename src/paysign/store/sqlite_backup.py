"""Copies of a SQLite database made while it is in use, with SQLite's online backup API.

The copy is taken in one step, inside one read transaction of the source: a consistent
snapshot at one commit, while the service's writers go on (WAL: a reader blocks no writer).
It is written to a private temporary file next to its destination, checked, synced, and only
then given its name, so a crash or a full disk never leaves a half copy under the real name.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa

from paysign.datadir import fsync_directory
from paysign.store.sealed_repo import REQUIRED_COLUMNS, kek_ids

# How long the copy waits for a lock the service holds (its checkpoints, a schema change).
_BUSY_TIMEOUT_SECONDS = 30
_REQUIRED_TABLES = frozenset({"alembic_version", "accounts", "wallets", "signatures"})


class NotABackup(ValueError):
    """The file is not a sound paysign SQLite database; the message says why."""


def copy_database(source: Path, dest: Path) -> None:
    """Copy ``source`` to ``dest`` (which must not exist), checked and durable, mode 0600: one
    self-contained file (rollback journal; the service turns WAL on when it opens one)."""
    if dest.exists():
        raise FileExistsError(f"{dest} already exists")
    with _temporary_beside(dest) as temporary:
        src = sqlite3.connect(source, timeout=_BUSY_TIMEOUT_SECONDS)
        try:
            out = sqlite3.connect(temporary)
            try:
                src.backup(out)  # pages=-1: the whole database in one step, one snapshot
                out.execute("PRAGMA journal_mode=DELETE")
                _require_sound(out, source)
            finally:
                out.close()
        finally:
            src.close()
        _fsync(temporary)
        # link(): atomic, and refuses a name that appeared meanwhile.
        os.link(temporary, dest)
    fsync_directory(dest.parent)


def check_backup(path: Path) -> None:
    """Raises ``NotABackup`` unless ``path`` is a sound paysign database."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise NotABackup(f"{path} cannot be opened as a SQLite database ({exc})") from None
    try:
        _require_sound(conn, path)
    finally:
        conn.close()


def sealed_key_ids(path: Path) -> list[str]:
    """The master keys (their ids) that wrap the secrets in the database at ``path``."""
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            found: set[str] = set()
            for column in REQUIRED_COLUMNS:
                found.update(kek_ids(conn, column))
            return sorted(found)
    finally:
        engine.dispose()


def _require_sound(conn: sqlite3.Connection, path: Path) -> None:
    try:
        verdict = conn.execute("PRAGMA integrity_check").fetchone()
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        raise NotABackup(f"{path} is not a SQLite database ({exc})") from None
    if verdict is None or verdict[0] != "ok":
        raise NotABackup(f"{path} failed SQLite's integrity check")
    missing = _REQUIRED_TABLES - tables
    if missing:
        raise NotABackup(f"{path} is not a paysign database (no {', '.join(sorted(missing))})")


@contextlib.contextmanager
def _temporary_beside(dest: Path) -> Iterator[Path]:
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    os.close(descriptor)  # mkstemp made it 0600: the copy holds sealed secrets and key hashes
    temporary = Path(name)
    try:
        yield temporary
    finally:
        for leftover in (temporary, Path(f"{temporary}-journal"), Path(f"{temporary}-wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        with contextlib.suppress(FileNotFoundError):
            Path(f"{temporary}-shm").unlink()


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
