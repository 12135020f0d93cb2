"""Whether the signing store should ask PostgreSQL for a connection now."""

from __future__ import annotations

import time

from paysign.metrics import pool_timed_out


class DatabaseUnreachable(RuntimeError):
    """PostgreSQL gave the signing store no connection a moment ago; not asked again yet."""


#: How long a transaction waits for a connection (the pool opens one meanwhile if it can).
CONNECTION_WAIT_SECONDS = 5.0
#: After a wait that ended with no connection, transactions fail at once for this long:
#: group commit re-runs a failed batch's requests one by one, and each waiting in turn would
#: keep the last of them for minutes.
UNREACHABLE_BACKOFF_SECONDS = 1.0


class Reachability:
    """Whether to ask PostgreSQL for a connection now: not for a moment after a wait for one
    ended with none."""

    def __init__(self) -> None:
        self._unreachable_until = 0.0

    def check(self) -> None:
        """Raises ``DatabaseUnreachable`` while backing off."""
        if time.monotonic() < self._unreachable_until:
            raise DatabaseUnreachable("PostgreSQL gave no connection a moment ago")

    def lost(self) -> None:
        """A wait for a connection ended with none."""
        self._unreachable_until = time.monotonic() + UNREACHABLE_BACKOFF_SECONDS
        pool_timed_out()
