"""The signing path's SQL for the approvals queue (``pending_sellers``), bounded per account.

A seller already waiting only has its latest terms refreshed. A new one is queued only while
the account has fewer than the cap waiting, and that count is only true if no other writer can
add one between the count and the commit: on SQLite the signing transaction holds the
database's only write lock (``BEGIN IMMEDIATE``) already; on PostgreSQL the account's row is
locked first (``FOR NO KEY UPDATE``: it serialises the writers of this queue, yet leaves the
row's foreign-key checks — every signature insert of the account — free to proceed). Deleting
an entry (the holder's decision) takes no lock: it only makes the count smaller.

This is the refusal path: none of it runs for a payment the policy allows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from paysign.policy.seller import SellerLocation


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """A seller refused for want of approval, with the terms it asked for."""

    account_id: str
    seller: SellerLocation
    pay_to: str
    amount: int
    network: str
    now: int


_LOCK_ACCOUNT = "SELECT id FROM accounts WHERE id = :account_id FOR NO KEY UPDATE"

# How many the account has waiting, and whether this seller is one of them.
_PENDING_STATE = """
SELECT COUNT(*), COUNT(CASE WHEN host = :host AND path = :path THEN 1 END)
FROM pending_sellers WHERE account_id = :account_id
"""

_RECORD_PENDING = """
INSERT INTO pending_sellers (account_id, host, path, first_seen, last_seen, refused_count,
    pay_to, amount, network)
VALUES (:account_id, :host, :path, :now, :now, 1, :pay_to, :amount, :network)
ON CONFLICT (account_id, host, path) DO UPDATE
SET last_seen = excluded.last_seen, refused_count = pending_sellers.refused_count + 1,
    pay_to = excluded.pay_to, amount = excluded.amount, network = excluded.network
"""


class PendingStatements:
    """The queue's statements over the cursor of ``signing_statements.SqlStatements`` (SQLite)."""

    _cur: Any
    _sql: Callable[[str], str]

    def lock_pending(self, account_id: str) -> None:
        """Nothing to do on SQLite: the transaction already excludes every other writer."""

    def pending_state(self, account_id: str, seller: SellerLocation) -> tuple[int, bool]:
        """How many sellers the account has waiting, and whether ``seller`` is one."""
        params = {"account_id": account_id, "host": seller.host, "path": seller.path}
        self._cur.execute(self._sql(_PENDING_STATE), params)
        count, this_one = self._cur.fetchone()
        return int(count), bool(this_one)

    def record_pending(self, entries: Sequence[PendingEntry]) -> None:
        params = [
            {
                "account_id": e.account_id,
                "host": e.seller.host,
                "path": e.seller.path,
                "now": e.now,
                "pay_to": e.pay_to,
                "amount": e.amount,
                "network": e.network,
            }
            for e in entries
        ]
        if len(params) == 1:  # psycopg sets up a pipeline for executemany
            self._cur.execute(self._sql(_RECORD_PENDING), params[0])
        else:
            self._cur.executemany(self._sql(_RECORD_PENDING), params)


class PostgresPendingStatements(PendingStatements):
    def lock_pending(self, account_id: str) -> None:
        """Held until the commit: the count read after it stays true until the batch's entries
        are written."""
        self._cur.execute(self._sql(_LOCK_ACCOUNT), {"account_id": account_id})
