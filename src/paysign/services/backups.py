"""Backups of a SQLite deployment and restoring one into an empty data directory.

A backup is the database alone: wallets' keys sealed, API keys and tokens as hashes, the
ledger, cap windows, policies. The master key is never in it, and must not be kept with it:
the two together are every wallet. A restore therefore checks, when the key is already in
place, that it opens what was restored, and otherwise says the key is still needed.

PostgreSQL deployments use ``pg_dump`` and ``pg_restore`` (docs/deploy.md).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from paysign.config import Settings
from paysign.custody import MASTER_KEY_FILENAME, InvalidMasterKey
from paysign.datadir import secure_data_dir
from paysign.errors import BackupRefused
from paysign.services.key_custody import open_vault
from paysign.store.database import Database
from paysign.store.sqlite_backup import NotABackup, check_backup, copy_database, sealed_key_ids

POSTGRES_HINT = (
    "the database is PostgreSQL: back it up with pg_dump and restore it with pg_restore "
    '(docs/deploy.md, "Backups and restore")'
)


def key_notice(settings: Settings) -> str:
    """Where the master key is, and that it belongs elsewhere than the backup."""
    if settings.master_key_pkcs11:
        where = "the PKCS#11 token's key (backed up as its vendor says)"
    elif settings.master_key is not None:
        where = "PAYSIGN_MASTER_KEY"
    else:
        where = str(settings.data_dir / MASTER_KEY_FILENAME)
    return (
        f"The master key is not in the backup. Keep a copy of {where} apart from the backups "
        "(another medium, another place): without it no wallet in a backup can be opened, and "
        "whoever holds both can spend from every wallet."
    )


@dataclass(frozen=True, slots=True)
class BackupMade:
    path: Path
    size: int
    master_key_ids: list[str]  # which master keys its secrets need (ids, never keys)


@dataclass(frozen=True, slots=True)
class Restored:
    path: Path
    master_key_ids: list[str]
    #: Whether a master key is configured or in the data directory; when it is not, the
    #: service refuses to start until it is put back.
    key_in_place: bool


def sqlite_file(settings: Settings) -> Path:
    if settings.database_url is not None and not settings.database_url.startswith("sqlite"):
        raise BackupRefused(POSTGRES_HINT)
    url = settings.resolved_database_url
    name = url.split("///", 1)[1] if "///" in url else ""
    if not name or name == ":memory:":
        raise BackupRefused("the database is in memory: there is nothing to back up")
    return Path(name)


def backup(settings: Settings, dest: Path, *, now: int) -> BackupMade:
    """A consistent copy of the live database at ``dest`` (a directory: a new file named after
    the time in it)."""
    source = sqlite_file(settings)
    if not source.exists():
        raise BackupRefused(f"there is no database at {source}")
    if dest.is_dir():
        stamp = datetime.fromtimestamp(now, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
        dest = dest / f"paysign-{stamp}.db"
    if dest.exists():
        raise BackupRefused(f"{dest} already exists; a backup never overwrites a file")
    copy_database(source, dest)
    return BackupMade(dest, dest.stat().st_size, sealed_key_ids(dest))


def restore(settings: Settings, source: Path) -> Restored:
    """Copy the backup at ``source`` into the configured data directory, which must hold no
    database yet."""
    target = sqlite_file(settings)
    for existing in (target, Path(f"{target}-wal")):
        if existing.exists():
            raise BackupRefused(
                f"{existing} exists: restore into a data directory without a database "
                "(a new PAYSIGN_DATA_DIR), never over a live one"
            )
    try:
        check_backup(source)
    except NotABackup as exc:
        raise BackupRefused(str(exc)) from None
    secure_data_dir(settings.data_dir)
    copy_database(source, target)
    key_in_place = (
        settings.master_key is not None
        or bool(settings.master_key_pkcs11)
        or (settings.data_dir / MASTER_KEY_FILENAME).exists()
    )
    return Restored(target, sealed_key_ids(target), key_in_place)


def require_key_opens(settings: Settings, restored: Restored, db: Database) -> None:
    """The key in place opens the restored secrets; otherwise the restore is undone (the data
    directory is left without a database) and ``BackupRefused`` says why."""
    try:
        open_vault(settings, db)
    except InvalidMasterKey as exc:
        db.dispose()
        for name in (restored.path, Path(f"{restored.path}-wal"), Path(f"{restored.path}-shm")):
            with contextlib.suppress(FileNotFoundError):
                name.unlink()
        raise BackupRefused(f"nothing was restored: {exc}") from None
