"""The approvals queue as the holder reads it: one page at a time, oldest first.

The queue is bounded (``policy.decide.MAX_PENDING_SELLERS``), but an account that filled it
before the bound existed may hold more, and each entry is a table row with a form: a page keeps
what the browser receives small whatever the queue holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from paysign.store import policy_repo
from paysign.store.database import Database
from paysign.store.policy_repo import PendingSeller


@dataclass(frozen=True, slots=True)
class PendingPage:
    sellers: list[PendingSeller]
    #: This page's number (from 1) and how many there are (at least 1, even when empty).
    page: int
    pages: int
    #: How many sellers are waiting in all.
    total: int


def pending_page(db: Database, account_id: str, *, page: int, size: int) -> PendingPage:
    """Page ``page`` of ``size`` sellers; a page past the end is the last one (after a decision
    emptied it, the holder sees what is left rather than nothing)."""
    with db.read() as conn:
        total = policy_repo.pending_count(conn, account_id)
        pages = max(1, -(-total // size))
        page = min(max(page, 1), pages)
        sellers = policy_repo.pending_of(conn, account_id, offset=(page - 1) * size, limit=size)
    return PendingPage(sellers, page, pages, total)
