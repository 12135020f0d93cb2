"""Apply the Alembic migrations at start, safely when several processes start at once."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from paysign.store.database import Database

MIGRATIONS = Path(__file__).parent / "migrations"
# Arbitrary constant naming paysign's migration lock among PostgreSQL advisory locks.
_PG_MIGRATION_LOCK = 0x7061_7973_6967


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def migrate(db: Database) -> None:
    """Bring the schema to the newest revision (idempotent)."""
    cfg = _config()
    with db.writer.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
            conn.commit()
        try:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()
        finally:
            if conn.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_MIGRATION_LOCK})
                conn.commit()
