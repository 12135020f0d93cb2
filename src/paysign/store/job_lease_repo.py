"""Job leases: taken, renewed and released each with one guarded statement, the same on SQLite
and PostgreSQL (no session state, so it works behind PgBouncer's transaction pooling)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from paysign.store.schema import job_leases


def try_hold(conn: Connection, name: str, holder: str, now: int, *, ttl: int) -> bool:
    """Take or renew ``name`` for ``holder`` until ``now + ttl``: granted when nobody holds it,
    ``holder`` already does, or the lease expired. Exactly one of any number of racers wins."""
    insert = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(job_leases)
    row = job_leases.c
    statement = (
        insert.values(name=name, holder=holder, expires_at=now + ttl)
        .on_conflict_do_update(
            index_elements=[row.name],
            set_={"holder": holder, "expires_at": now + ttl},
            where=sa.or_(row.holder == holder, row.expires_at < now),
        )
        .returning(row.holder)
    )
    return conn.execute(statement).first() is not None


def release(conn: Connection, name: str, holder: str) -> None:
    """Let the next process take ``name`` at once (only if ``holder`` still holds it)."""
    conn.execute(
        job_leases.update()
        .where(job_leases.c.name == name, job_leases.c.holder == holder)
        .values(expires_at=0)
    )


def holder_of(conn: Connection, name: str, now: int) -> str | None:
    """Who holds ``name`` at ``now``; None when nobody does."""
    found = conn.execute(
        sa.select(job_leases.c.holder).where(
            job_leases.c.name == name, job_leases.c.expires_at >= now
        )
    ).first()
    return None if found is None else str(found[0])
