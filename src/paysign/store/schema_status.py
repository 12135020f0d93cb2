"""Where a database's schema stands against this version's migrations, read without changing
anything (``paysign migrate --status``, ``paysign check``)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy.engine import Connection

from paysign.store.migrate import MIGRATIONS
from paysign.store.schema import wallets


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    #: The database's revision; None when no migration was ever applied.
    current: str | None
    #: The newest revision this version of paysign knows.
    head: str
    #: Revisions this version would apply, oldest first.
    pending: tuple[str, ...]
    #: False when the database was migrated by a newer paysign (a rolled-back upgrade).
    known: bool

    @property
    def up_to_date(self) -> bool:
        return self.known and not self.pending


def schema_status(conn: Connection) -> SchemaStatus:
    script = ScriptDirectory(str(MIGRATIONS))
    head = script.get_current_head()
    assert head is not None  # the package ships its migrations
    current = MigrationContext.configure(conn).get_current_revision()
    known = _known(script, current)
    pending: list[str] = []
    if known:
        # Newest first from walk_revisions: reversed, every revision after ``current``.
        pending = [r.revision for r in script.walk_revisions()]
        pending.reverse()
        if current is not None:
            pending = pending[pending.index(current) + 1 :]
    return SchemaStatus(current, head, tuple(pending), known)


def _known(script: ScriptDirectory, revision: str | None) -> bool:
    if revision is None:
        return True
    try:
        return script.get_revision(revision) is not None
    except CommandError:  # "Can't locate revision identified by ..."
        return False


def sealed_wallet_key(conn: Connection) -> tuple[str, bytes] | None:
    """One stored wallet key (its wallet id and sealed bytes), to prove the master key opens
    what is stored; None when no wallet exists yet."""
    row = conn.execute(
        sa.select(wallets.c.id, wallets.c.sealed_key).order_by(wallets.c.created_at).limit(1)
    ).first()
    return None if row is None else (row.id, bytes(row.sealed_key))
