"""Which process of the cluster runs a periodic job: the one holding the job's lease.

A lease is a row with a holder and an expiry. Its holder renews it well before it expires; a
holder that dies stops renewing, and after the expiry the next process to ask takes it over.
No session state (no advisory lock), so it works on SQLite, on PostgreSQL and behind PgBouncer
in transaction pooling mode alike.
"""

from __future__ import annotations

import os
import secrets
import socket

from paysign.clock import Clock
from paysign.store import job_lease_repo
from paysign.store.database import Database


def new_holder_id() -> str:
    """Unique across hosts and restarts, and readable: ``host:pid:random``."""
    return f"{socket.gethostname()[:80]}:{os.getpid()}:{secrets.token_hex(4)}"


class JobLease:
    """The lease of one job for one holder (this process unless told otherwise)."""

    def __init__(
        self, db: Database, clock: Clock, name: str, *, ttl: int, holder: str | None = None
    ) -> None:
        if ttl < 1:
            raise ValueError("a lease lasts at least one second")
        self.db = db
        self.clock = clock
        self.name = name
        self.ttl = ttl
        self.holder = holder or new_holder_id()

    def hold(self) -> bool:
        """Take or renew the lease for ``ttl`` seconds from now; False while another holds it."""
        with self.db.write() as conn:
            return job_lease_repo.try_hold(
                conn, self.name, self.holder, self.clock.now(), ttl=self.ttl
            )

    def release(self) -> None:
        """Give the lease up (on a clean stop), so that another process need not wait it out."""
        with self.db.write() as conn:
            job_lease_repo.release(conn, self.name, self.holder)


def lease_holder(db: Database, clock: Clock, name: str) -> str | None:
    """The holder of the job's unexpired lease, if any."""
    with db.read() as conn:
        return job_lease_repo.holder_of(conn, name, clock.now())
