"""Apply the Alembic migrations at start, safely when several processes start at once."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from paysign.store.database import Database

MIGRATIONS = Path(__file__).parent / "migrations"
# Arbitrary constant naming paysign's migration lock among PostgreSQL advisory locks.
_PG_MIGRATION_LOCK = 0x7061_7973_6967


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def migrate(db: Database) -> None:
    """Bring the schema to the newest revision (idempotent).

    A schema already at the newest revision is left alone without a lock: every worker and
    every operator command starts here. On PostgreSQL the upgrade runs in one transaction with
    its lock (``pg_advisory_xact_lock``; PostgreSQL's DDL is transactional), so the commit or
    a rollback lets it go. A session lock outlived its transaction behind a transaction pooler
    (PgBouncer): the server connection it was taken on went back to the pool still holding it,
    the unlock ran on another, and every later migrator waited for ever.
    """
    cfg = _config()
    with db.writer.connect() as conn:
        head = ScriptDirectory.from_config(cfg).get_current_head()
        current = MigrationContext.configure(conn).get_current_revision()
        conn.rollback()
        if current is not None and current == head:
            return
        if conn.dialect.name == "postgresql":
            # Alembic runs in the transaction this begins, and commits nothing itself.
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        conn.commit()
