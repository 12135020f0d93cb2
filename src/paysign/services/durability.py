"""Whether the database keeps what paysign committed through a crash: said by ``paysign
check``, and warned about when ``paysign serve`` starts.

A signature is answered only once its record and the spend it reserved are committed, so that a
crash can take back neither: the caps count every authorization a seller may still settle. On
SQLite paysign makes each commit durable itself (``store.wal_sync``). On PostgreSQL that is the
server's settings, which a role, a database or the connection URL may change (``ALTER ROLE
paysign SET synchronous_commit = off``, ``?options=-csynchronous_commit%3Doff``): they are read
as this service's own connections see them.

    >>> durability = DatabaseDurability(fsync="on", synchronous_commit="off", full_page_writes="on")
    >>> [loss.split(":")[0] for loss in durability.losses]
    ['synchronous_commit = off']
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from paysign.store.database import Database
from paysign.store.server_settings import durability_settings

log = structlog.get_logger("paysign.store")


@dataclass(frozen=True, slots=True)
class DatabaseDurability:
    """PostgreSQL's settings that decide whether a commit survives a crash."""

    fsync: str
    synchronous_commit: str
    full_page_writes: str

    @property
    def losses(self) -> tuple[str, ...]:
        """Why a crash could take back signatures already answered, and the spend they
        reserved (their authorizations may still settle); empty when none can."""
        found = []
        if self.fsync == "off":
            found.append(
                "fsync = off: a power loss or a crash of the host can lose what was committed, "
                "or corrupt the database"
            )
        # local, remote_write, remote_apply and on all flush the server's own log first.
        if self.synchronous_commit == "off":
            found.append(
                "synchronous_commit = off: a crash of the database server can take back its "
                "last commits, signatures already answered among them"
            )
        return tuple(found)

    @property
    def cautions(self) -> tuple[str, ...]:
        """What is safe only on some hardware: without full-page writes a power loss mid-write
        can leave a page half old, half new."""
        if self.full_page_writes != "off":
            return ()
        return (
            "full_page_writes = off: a power loss mid-write can tear a page; safe only on a "
            "file system that writes 8 kB pages atomically (ZFS)",
        )

    def describe(self) -> str:
        return (
            f"fsync = {self.fsync}, synchronous_commit = {self.synchronous_commit}, "
            f"full_page_writes = {self.full_page_writes}"
        )


def database_durability(db: Database) -> DatabaseDurability | None:
    """The PostgreSQL server's durability settings; None on SQLite, which paysign makes
    durable itself."""
    if db.is_sqlite:
        return None
    with db.read() as conn:
        return DatabaseDurability(**durability_settings(conn))


def warn_if_not_durable(db: Database) -> bool:
    """Log a warning, and say so, when a crash of the database could take back answered
    signatures. A database that cannot be asked is the start's own business: nothing said."""
    try:
        durability = database_durability(db)
    except Exception:  # the start goes on; /readyz reports an outage
        return False
    if durability is None or not durability.losses:
        return False
    log.warning(
        "database_not_durable",
        settings=durability.describe(),
        losses=list(durability.losses),
        see="docs/deploy.md, Durability",
    )
    return True
