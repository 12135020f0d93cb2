"""``paysign migrate``: the schema brought to this version's newest revision without serving,
and where a database stands (``--status``)."""

from __future__ import annotations

from typing import Any

from paysign.errors import SchemaFromNewerVersion
from paysign.store.database import Database
from paysign.store.migrate import migrate
from paysign.store.schema_status import SchemaStatus, schema_status


def migration_status(db: Database) -> SchemaStatus:
    with db.read() as conn:
        return schema_status(conn)


def status_report(status: SchemaStatus) -> dict[str, Any]:
    return {
        "current": status.current,
        "head": status.head,
        "pending": list(status.pending),
        "upToDate": status.up_to_date,
    }


def refuse_newer(status: SchemaStatus) -> None:
    if not status.known:
        raise SchemaFromNewerVersion(
            f"the database is at schema {status.current}, which this paysign does not know "
            f"(its newest is {status.head}): a newer version migrated it. Run that version, or "
            "restore the backup taken before the upgrade (docs/deploy.md, rolling back)"
        )


def apply_migrations(db: Database) -> dict[str, Any]:
    """Apply every pending migration; what was applied. Refuses a schema from a newer version
    before touching anything."""
    before = migration_status(db)
    refuse_newer(before)
    migrate(db)
    after = migration_status(db)
    return {"before": before.current, "current": after.current, "applied": list(before.pending)}
