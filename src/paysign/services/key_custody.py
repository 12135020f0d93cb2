"""The master key against what the database holds: opening the vault at start (failing closed
when the key cannot open the stored secrets) and rotating to a new master key.

Rotation re-wraps the 32-byte data key of every sealed secret from a previous master key to
the current one, a page of rows per short transaction, each row written only if it still holds
what was read (compare-and-set). So it runs beside a serving process that holds both keys,
and an interrupted rotation is finished by running it again: rows already under the current
key are left as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from paysign.config import Settings
from paysign.custody import (
    MASTER_KEY_FILENAME,
    EnvelopeVault,
    InvalidMasterKey,
    MasterKeyMissing,
    SealedSecret,
    SecretUnreadable,
    vault_from_settings,
)
from paysign.services.accounts import totp_context, wallet_context
from paysign.services.notifications import webhook_context
from paysign.services.oauth_refresh import successor_key_context
from paysign.store import sealed_repo
from paysign.store.database import Database
from paysign.store.sealed_repo import REQUIRED_COLUMNS, SEALED_COLUMNS, SealedColumn

ROTATION_PAGE = 200


_CONTEXTS: dict[str, Callable[[str], str]] = {
    "wallet": wallet_context,
    "totp": totp_context,
    "refresh": successor_key_context,
    "webhook": webhook_context,
}


def _context(column: SealedColumn, row_id: str) -> str:
    return _CONTEXTS[column.name](row_id)


def census(db: Database) -> Counter[str]:
    """How many stored secrets the service needs each master key (by its id) for."""
    total: Counter[str] = Counter()
    with db.read() as conn:
        for column in REQUIRED_COLUMNS:
            total.update(sealed_repo.kek_ids(conn, column))
    return total


def open_vault(settings: Settings, db: Database, *, may_create_key: bool = True) -> EnvelopeVault:
    """The configured vault, proven against the database: every stored secret is wrapped by a
    key it holds, and one secret under each opens. Raises ``InvalidMasterKey`` with what to do.

    ``may_create_key=False``: no master key file is made even when nothing is sealed yet, for
    an operator command on a database the service already uses, which may hold its key in
    ``PAYSIGN_MASTER_KEY`` where this command cannot see it."""
    held = census(db)
    try:
        vault = vault_from_settings(settings, create=may_create_key and not held)
    except MasterKeyMissing:
        if held:
            raise
        raise MasterKeyMissing(
            f"PAYSIGN_MASTER_KEY is unset and {settings.data_dir / MASTER_KEY_FILENAME} does not "
            "exist, and this command does not create a master key for a database already in "
            "use: a key made here would seal new wallets under a key the service does not have. "
            "Run the command with the service's environment (its PAYSIGN_MASTER_KEY), or start "
            "the service once to create the key file."
        ) from None
    require_openable(db, vault, held)
    return vault


def require_openable(db: Database, vault: EnvelopeVault, held: Counter[str] | None = None) -> None:
    held = census(db) if held is None else held
    unknown = {kek_id: count for kek_id, count in held.items() if kek_id not in vault.held_kek_ids}
    if unknown:
        listed = ", ".join(f"{count} under {kek_id}" for kek_id, count in sorted(unknown.items()))
        raise InvalidMasterKey(
            f"the database holds secrets wrapped by a master key this service does not have "
            f"({listed}; the configured key is {vault.kek_id}). Set PAYSIGN_MASTER_KEY to the key "
            "that sealed them, or, in the middle of a rotation, list the old key in "
            "PAYSIGN_PREVIOUS_MASTER_KEYS and run `paysign admin rotate-master-key`."
        )
    with db.read() as conn:
        for kek_id in held:
            for column in REQUIRED_COLUMNS:
                found = sealed_repo.one_sealed_with(conn, column, kek_id)
                if found is None:
                    continue
                row_id, blob = found
                try:
                    vault.open(_context(column, row_id), SealedSecret.from_bytes(blob))
                except SecretUnreadable as exc:
                    raise InvalidMasterKey(
                        f"a stored {column.name} secret does not open with master key "
                        f"{kek_id}: {exc.reason}. The key is not the one that sealed it, or "
                        "the database was altered; restore the right key or the database."
                    ) from None
                break


@dataclass(slots=True)
class RotationReport:
    kek_id: str
    rewrapped: dict[str, int] = field(default_factory=dict)
    already_current: dict[str, int] = field(default_factory=dict)
    #: Rows changed by someone else between read and write, re-read and done on a later pass.
    retried: int = 0
    #: Secrets the service can do without, under a key no longer held: left as they are.
    skipped: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "kekId": self.kek_id,
            "rewrapped": self.rewrapped,
            "alreadyCurrent": self.already_current,
            "retried": self.retried,
            "skipped": self.skipped,
        }


def rotate_master_key(
    db: Database,
    vault: EnvelopeVault,
    *,
    page_size: int = ROTATION_PAGE,
    after_page: Callable[[str, int], None] | None = None,
) -> RotationReport:
    """Re-wrap every stored secret under ``vault``'s current key; raises ``SecretUnreadable``
    (nothing half-written: each row is its own compare-and-set) when one is wrapped by a key
    the vault does not hold. ``after_page(column name, rows so far)`` follows each commit."""
    report = RotationReport(vault.kek_id)
    for column in SEALED_COLUMNS:
        rewrapped = current = 0
        after_id = ""
        while True:
            with db.read() as conn:
                rows = sealed_repo.page(conn, column, after_id=after_id, limit=page_size)
            if not rows:
                break
            changed: list[tuple[str, bytes, bytes]] = []
            for row_id, blob in rows:
                try:
                    sealed = SealedSecret.from_bytes(blob)
                    if sealed.kek_id == vault.kek_id:
                        current += 1
                        continue
                    new = vault.rewrap(_context(column, row_id), sealed).to_bytes()
                except SecretUnreadable:
                    if column.required:
                        raise
                    report.skipped += 1
                    continue
                changed.append((row_id, blob, new))
            lost: list[str] = []
            with db.write() as conn:
                for row_id, old, new in changed:
                    if sealed_repo.replace_sealed(conn, column, row_id, old=old, new=new):
                        rewrapped += 1
                    else:
                        lost.append(row_id)
            # A row rewritten meanwhile (a holder reset their authenticator) is read again:
            # whatever it holds now is wrapped again if it needs to be.
            for row_id in lost:
                report.retried += 1
                rewrapped += _rotate_one(db, vault, column, row_id)
            after_id = rows[-1][0]
            if after_page is not None:
                after_page(column.name, rewrapped + current)
        report.rewrapped[column.name] = rewrapped
        report.already_current[column.name] = current
    return report


def _rotate_one(db: Database, vault: EnvelopeVault, column: SealedColumn, row_id: str) -> int:
    while True:
        with db.read() as conn:
            blob = sealed_repo.find_sealed(conn, column, row_id)
        if blob is None:
            return 0  # the row is gone
        sealed = SealedSecret.from_bytes(blob)
        if sealed.kek_id == vault.kek_id:
            return 0
        try:
            new = vault.rewrap(_context(column, row_id), sealed).to_bytes()
        except SecretUnreadable:
            if column.required:
                raise
            return 0
        with db.write() as conn:
            if sealed_repo.replace_sealed(conn, column, row_id, old=blob, new=new):
                return 1
