"""The account at a glance, as the dashboard and the keys page show it: the wallet, the API
keys, spend against every cap, settled spend apart from spend still reserved (signed, awaiting
settlement), today's refusals by reason, the sellers waiting for approval with their price, and
the latest signatures with their settlement."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from paysign.errors import AccountNotFound
from paysign.policy.caps import Window, day_window, hour_window, month_window
from paysign.services.portal_deps import PortalDeps
from paysign.store import activity_repo, policy_repo, portal_repo, settlement_repo
from paysign.store.activity_repo import ActivityFilters, ActivityRow
from paysign.store.policy_repo import PendingSeller
from paysign.store.portal_repo import KeyRow
from paysign.store.settlement_repo import SpendByStatus

__all__ = [
    "RECENT_PAYMENTS",
    "ActivityRow",
    "KeyRow",
    "Overview",
    "PendingSeller",
    "SpendByStatus",
    "active_key",
    "overview",
]

#: The dashboard's recent payments: the activity list's newest signatures.
RECENT_PAYMENTS = ActivityFilters(decision="signed")
#: The pending sellers the overview lists (the approvals page has them all).
PENDING_SHOWN = 5
#: Today's refusals are counted up to this many; past it the overview says "or more".
REFUSALS_COUNTED = 1_000


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
    #: The largest single payment the policy allows, in base units; None when uncapped.
    per_payment: int | None = None
    #: Today's (UTC) refusals as (reason slug, count), the most frequent first (then by name).
    refusals_today: tuple[tuple[str, int], ...] = ()
    #: True when today's refusals reached ``REFUSALS_COUNTED``: the counts are a floor.
    refusals_capped: bool = False
    #: The oldest few sellers waiting for approval, with their latest price and payee.
    pending_sellers: tuple[PendingSeller, ...] = ()
    #: (window name, signed amounts by settlement) for today and this month (UTC).
    settlement: tuple[tuple[str, SpendByStatus], ...] = ()


def overview(deps: PortalDeps, account_id: str) -> Overview:
    now = deps.clock.now()
    with deps.db.read() as conn:
        account = portal_repo.find_account(conn, account_id)
        if account is None:
            raise AccountNotFound("the signed-in account no longer exists")
        caps = policy_repo.load_settings(conn, account_id).caps
        # The hourly cap is off unless set: no bar for a window nothing limits.
        windows: list[tuple[str, Window, int | None]] = (
            [("This hour (UTC)", hour_window(now), caps.hourly)] if caps.hourly else []
        )
        windows += [
            ("Today (UTC)", day_window(now), caps.daily),
            ("This month (UTC)", month_window(now), caps.monthly),
        ]
        spend = [
            (label, policy_repo.spent_in(conn, account_id, window), limit)
            for label, window, limit in windows
        ]
        today = ActivityFilters(decision="refused", since=day_window(now).start)
        refused = activity_repo.page(conn, account_id, today, limit=REFUSALS_COUNTED)
        by_reason = Counter(row.reason or "unknown" for row in refused)
        return Overview(
            account.email,
            portal_repo.wallet_address(conn, account_id),
            portal_repo.keys_of(conn, account_id),
            policy_repo.pending_count(conn, account_id),
            spend,
            activity_repo.page(conn, account_id, RECENT_PAYMENTS, limit=5),
            now,
            per_payment=caps.per_payment,
            refusals_today=tuple(sorted(by_reason.items(), key=lambda item: (-item[1], item[0]))),
            refusals_capped=len(refused) >= REFUSALS_COUNTED,
            pending_sellers=tuple(policy_repo.pending_of(conn, account_id, limit=PENDING_SHOWN)),
            settlement=tuple(
                (label, settlement_repo.spend_by_status(conn, account_id, window.start))
                for label, window in (
                    ("Today (UTC)", day_window(now)),
                    ("This month (UTC)", month_window(now)),
                )
            ),
        )
