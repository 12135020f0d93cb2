"""The account at a glance, as the dashboard and the keys page show it: the wallet, the API
keys, spend against the caps, the pending approvals and the latest signatures."""

from __future__ import annotations

from dataclasses import dataclass

from paysign.errors import AccountNotFound
from paysign.policy.caps import day_window, month_window
from paysign.services.portal_deps import PortalDeps
from paysign.store import activity_repo, policy_repo, portal_repo
from paysign.store.activity_repo import ActivityFilters, ActivityRow
from paysign.store.portal_repo import KeyRow

__all__ = ["RECENT_PAYMENTS", "ActivityRow", "KeyRow", "Overview", "active_key", "overview"]

#: The dashboard's recent payments: the activity list's newest signatures.
RECENT_PAYMENTS = ActivityFilters(decision="signed")


def active_key(rows: list[KeyRow], now: int) -> KeyRow | None:
    return next((k for k in rows if k.revoked_at is None and k.expires_at > now), None)


@dataclass(frozen=True, slots=True)
class Overview:
    email: str
    wallet_address: str | None
    keys: list[KeyRow]
    pending: int  # how many sellers wait for approval
    #: (window name, spent, cap or None) for today and this month (UTC), in base units.
    spend: list[tuple[str, int, int | None]]
    #: The latest few signatures, newest first.
    recent: list[ActivityRow]
    #: When this was read: the moment a key is judged active or expired against.
    now: int


def overview(deps: PortalDeps, account_id: str) -> Overview:
    now = deps.clock.now()
    with deps.db.read() as conn:
        account = portal_repo.find_account(conn, account_id)
        if account is None:
            raise AccountNotFound("the signed-in account no longer exists")
        caps = policy_repo.load_settings(conn, account_id).caps
        spend = [
            (label, policy_repo.spent_in(conn, account_id, window), limit)
            for label, window, limit in (
                ("Today (UTC)", day_window(now), caps.daily),
                ("This month (UTC)", month_window(now), caps.monthly),
            )
        ]
        return Overview(
            account.email,
            portal_repo.wallet_address(conn, account_id),
            portal_repo.keys_of(conn, account_id),
            policy_repo.pending_count(conn, account_id),
            spend,
            activity_repo.page(conn, account_id, RECENT_PAYMENTS, limit=5),
            now,
        )
