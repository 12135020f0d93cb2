"""Giving back the spend of a signature that expired unused, from every window that counted it.

The day and month windows always counted a live signature. The hour's counted it only under an
hourly cap, and an allow rule's budget windows only while the rule carried its budget: the
signature's row says which (``reserved_windows``), written when it was signed, and exactly
those are given back. Rows signed before that was kept say nothing; for them it is read back
from the policy, and only where the policy certainly looked the same when the signature was
made: settings saved, and rules written, strictly before it. Where that is not certain the
window keeps the amount — the reconciler fails toward under-spending, never toward a cap passed.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.policy.caps import hour_window, windows_at
from paysign.policy.rules import Rule
from paysign.policy.seller import SellerLocation
from paysign.store import reserved_windows
from paysign.store.schema import (
    policies,
    policy_rules,
    seller_spend_windows,
    signatures,
    spend_windows,
)


@dataclass(frozen=True, slots=True)
class ExpiredSpend:
    """A live signature that expired unused: what it reserved, for whom, when."""

    signature_id: int
    account_id: str
    amount: int
    signed_at: int
    #: The row's record of its extra windows; None on rows older than that record.
    reserved_in: str | None = None


def release_expired(conn: Connection, spend: ExpiredSpend) -> None:
    """Take ``spend.amount`` out of each window that counted the signature (none below 0)."""
    day, month = windows_at(spend.signed_at)
    for window in (day, month):
        _release_account(conn, spend.account_id, window.name, window.start, spend.amount)
    if spend.reserved_in is None:
        hour_start = hour_window(spend.signed_at).start if _hourly_cap_then(conn, spend) else None
        rules = _budgets_then(conn, spend)
    else:
        recorded = reserved_windows.decode(spend.reserved_in)
        hour_start, rules = recorded.hour_start, list(recorded.rules)
    if hour_start is not None:
        _release_account(conn, spend.account_id, "hourly", hour_start, spend.amount)
    for rule in rules:
        for window in (day, month):
            _release_seller(conn, spend, rule, window.name, window.start)


def _hourly_cap_then(conn: Connection, spend: ExpiredSpend) -> bool:
    """For a row that does not record it: whether the account had an hourly cap when it
    signed (it has one now, set before)."""
    row = conn.execute(
        sa.select(policies.c.cap_hourly, policies.c.updated_at).where(
            policies.c.account_id == spend.account_id
        )
    ).first()
    return row is not None and row.cap_hourly is not None and row.updated_at < spend.signed_at


def _budgets_then(conn: Connection, spend: ExpiredSpend) -> list[Rule]:
    """For a row that does not record them: the allow rules with a budget that matched the
    seller when the signature was made.

    Saving a policy writes every rule again (``created_at`` then), so a budgeted rule written
    before the signature carried the same budget when it was made, and the signing path reserved
    in the windows of every budgeted allow rule matching the seller."""
    rules = conn.execute(
        sa.select(policy_rules.c.host, policy_rules.c.path).where(
            policy_rules.c.account_id == spend.account_id,
            policy_rules.c.kind == "allow",
            policy_rules.c.created_at < spend.signed_at,
            sa.or_(policy_rules.c.cap_daily.is_not(None), policy_rules.c.cap_monthly.is_not(None)),
        )
    ).all()
    if not rules:
        return []
    seller = conn.execute(
        sa.select(signatures.c.seller_host, signatures.c.seller_path).where(
            signatures.c.id == spend.signature_id
        )
    ).one()
    where = SellerLocation(seller.seller_host, seller.seller_path)
    candidates = (Rule(r.host, r.path) for r in rules)
    return [rule for rule in candidates if rule.matches(where)]


def _release_account(conn: Connection, account_id: str, name: str, start: int, amount: int) -> None:
    conn.execute(
        spend_windows.update()
        .where(
            spend_windows.c.account_id == account_id,
            spend_windows.c.window == name,
            spend_windows.c.start == start,
        )
        .values(
            spent=sa.case((spend_windows.c.spent < amount, 0), else_=spend_windows.c.spent - amount)
        )
    )


def _release_seller(
    conn: Connection, spend: ExpiredSpend, rule: Rule, name: str, start: int
) -> None:
    table, amount = seller_spend_windows, spend.amount
    conn.execute(
        table.update()
        .where(
            table.c.account_id == spend.account_id,
            table.c.host == rule.host,
            table.c.path == rule.path,
            table.c.window == name,
            table.c.start == start,
        )
        .values(spent=sa.case((table.c.spent < amount, 0), else_=table.c.spent - amount))
    )
