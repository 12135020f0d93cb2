"""The Alembic migrations build exactly the schema the code declares, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from paysign.store.database import Database
from paysign.store.migrate import MIGRATIONS, migrate
from paysign.store.schema import metadata


def test_migrated_schema_matches_declared_tables(db: Database) -> None:
    with db.writer.connect() as conn:
        context = MigrationContext.configure(conn)
        differences = compare_metadata(context, metadata)
    assert differences == []


def test_migrating_twice_changes_nothing(db: Database) -> None:
    migrate(db)  # the fixture already migrated once
    with db.read() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
    assert version == ScriptDirectory(str(MIGRATIONS)).get_current_head()
