"""Whether this process can serve: its database answers a query."""

from __future__ import annotations

from collections.abc import Callable

from paysign.store.database import Database


def database_probe(db: Database) -> Callable[[], bool]:
    """A check, run per readiness request, that ``db`` answers; any failure means not ready."""

    def probe() -> bool:
        try:
            with db.read() as conn:
                conn.exec_driver_sql("SELECT 1")
            return True
        except Exception:
            return False

    return probe
