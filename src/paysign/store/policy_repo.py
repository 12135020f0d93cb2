"""Policy, rules, pending sellers, spend windows and refusals, over one open transaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from paysign.policy.caps import Caps, Window
from paysign.policy.decide import MAX_PENDING_SELLERS, Approval, PolicySettings
from paysign.policy.document import PolicyDocument
from paysign.policy.payees import payee_rules_of, stored_payee_rules
from paysign.policy.rules import Rule
from paysign.policy.seller import SellerLocation
from paysign.policy.seller_budgets import SellerBudget
from paysign.store.schema import (
    pending_sellers,
    policies,
    policy_rules,
    refusals,
    seller_spend_windows,
    spend_windows,
)

_PENDING_ORDER = (pending_sellers.c.first_seen, pending_sellers.c.host, pending_sellers.c.path)

POLICY_COLUMNS = (
    policies.c.approval,
    policies.c.premium,
    policies.c.standard,
    policies.c.open_ecosystem,
    policies.c.cap_per_payment,
    policies.c.cap_daily,
    policies.c.cap_monthly,
    policies.c.frozen,
    policies.c.payee_rules,
    policies.c.cap_hourly,
)


def settings_from_values(values: Sequence[Any]) -> PolicySettings:
    """Settings from the POLICY_COLUMNS values of a row; no row (all None) means defaults."""
    approval, premium, standard, open_ecosystem, per_payment, daily, monthly = values[:7]
    frozen, payees, hourly = values[7:]
    if approval is None:
        return PolicySettings.defaults()
    return PolicySettings(
        Approval(approval),
        bool(premium),
        bool(standard),
        bool(open_ecosystem),
        Caps(per_payment, daily, monthly, hourly),
        frozen=bool(frozen),
        payees=payee_rules_of(payees),
    )


def _upsert(conn: Connection, table: sa.Table) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def load_settings(conn: Connection, account_id: str) -> PolicySettings:
    row = conn.execute(
        sa.select(*POLICY_COLUMNS).where(policies.c.account_id == account_id)
    ).first()
    return PolicySettings.defaults() if row is None else settings_from_values(tuple(row))


def load_document(conn: Connection, account_id: str) -> PolicyDocument:
    rows = conn.execute(
        sa.select(
            policy_rules.c.kind,
            policy_rules.c.host,
            policy_rules.c.path,
            policy_rules.c.cap_daily,
            policy_rules.c.cap_monthly,
        )
        .where(policy_rules.c.account_id == account_id)
        .order_by(policy_rules.c.id)
    ).all()
    # Bounded like the queue: an account that filled it before it had a bound is listed as
    # far as the bound (the portal pages through the rest).
    pending = conn.execute(
        sa.select(pending_sellers.c.host, pending_sellers.c.path)
        .where(pending_sellers.c.account_id == account_id)
        .order_by(*_PENDING_ORDER)
        .limit(MAX_PENDING_SELLERS)
    ).all()
    return PolicyDocument(
        load_settings(conn, account_id),
        tuple(Rule(r.host, r.path) for r in rows if r.kind == "allow"),
        tuple(Rule(r.host, r.path) for r in rows if r.kind == "deny"),
        tuple(str(SellerLocation(p.host, p.path)) for p in pending),
        budgets=tuple(
            (Rule(r.host, r.path), SellerBudget(r.cap_daily, r.cap_monthly))
            for r in rows
            if r.kind == "allow" and (r.cap_daily is not None or r.cap_monthly is not None)
        ),
    )


def save_settings(conn: Connection, account_id: str, settings: PolicySettings, now: int) -> None:
    values = {
        "approval": settings.approval.value,
        "premium": settings.premium,
        "standard": settings.standard,
        "open_ecosystem": settings.open_ecosystem,
        "cap_per_payment": settings.caps.per_payment,
        "cap_daily": settings.caps.daily,
        "cap_monthly": settings.caps.monthly,
        "cap_hourly": settings.caps.hourly,
        "frozen": settings.frozen,
        "payee_rules": stored_payee_rules(settings.payees),
        "updated_at": now,
    }
    stmt = _upsert(conn, policies).values(account_id=account_id, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=[policies.c.account_id], set_=values))


def set_frozen(conn: Connection, account_id: str, frozen: bool, now: int) -> bool:
    """Freeze or unfreeze the account's spending, the rest of its policy unchanged; whether
    that changed anything."""
    settings = load_settings(conn, account_id)
    if settings.frozen == frozen:
        return False
    save_settings(conn, account_id, dataclasses.replace(settings, frozen=frozen), now)
    return True


def replace_rules(conn: Connection, account_id: str, doc: PolicyDocument, now: int) -> None:
    conn.execute(policy_rules.delete().where(policy_rules.c.account_id == account_id))
    budgets = dict(doc.budgets)
    none = SellerBudget()
    rows = [
        {
            "account_id": account_id,
            "kind": kind,
            "host": r.host,
            "path": r.path,
            "created_at": now,
            "cap_daily": budgets.get(r, none).daily,
            "cap_monthly": budgets.get(r, none).monthly,
        }
        for kind, rules in (("allow", doc.allow), ("deny", doc.deny))
        for r in rules
    ]
    for start in range(0, len(rows), 5_000):
        conn.execute(policy_rules.insert(), rows[start : start + 5_000])


def add_rule(
    conn: Connection, account_id: str, kind: Literal["allow", "deny"], rule: Rule, now: int
) -> None:
    """Put a rule on one list and take it off the other (a seller is allowed or denied)."""
    other = "deny" if kind == "allow" else "allow"
    conn.execute(
        policy_rules.delete().where(
            policy_rules.c.account_id == account_id,
            policy_rules.c.kind == other,
            policy_rules.c.host == rule.host,
            policy_rules.c.path == rule.path,
        )
    )
    stmt = _upsert(conn, policy_rules).values(
        account_id=account_id, kind=kind, host=rule.host, path=rule.path, created_at=now
    )
    conn.execute(stmt.on_conflict_do_nothing())


def resolve_pending(conn: Connection, account_id: str, rule: Rule) -> int:
    """Remove the pending sellers this rule now decides; how many there were."""
    rows = conn.execute(
        sa.select(pending_sellers.c.host, pending_sellers.c.path).where(
            pending_sellers.c.account_id == account_id
        )
    ).all()
    settled = [r for r in rows if rule.matches(SellerLocation(r.host, r.path))]
    for r in settled:
        conn.execute(
            pending_sellers.delete().where(
                pending_sellers.c.account_id == account_id,
                pending_sellers.c.host == r.host,
                pending_sellers.c.path == r.path,
            )
        )
    return len(settled)


@dataclass(frozen=True, slots=True)
class PendingSeller:
    host: str
    path: str
    first_seen: int
    last_seen: int
    refused_count: int
    #: The latest refused payment's terms; ``None`` for an entry older than their keeping.
    pay_to: str | None = None
    amount: int | None = None
    network: str | None = None


def pending_of(
    conn: Connection, account_id: str, *, offset: int = 0, limit: int | None = None
) -> list[PendingSeller]:
    """Oldest first (then by host and path, so pages neither repeat nor skip an entry)."""
    rows = conn.execute(
        sa.select(pending_sellers)
        .where(pending_sellers.c.account_id == account_id)
        .order_by(*_PENDING_ORDER)
        .offset(offset)
        .limit(limit)
    ).all()
    return [
        PendingSeller(
            r.host,
            r.path,
            r.first_seen,
            r.last_seen,
            r.refused_count,
            r.pay_to,
            r.amount,
            r.network,
        )
        for r in rows
    ]


def pending_count(conn: Connection, account_id: str) -> int:
    return int(
        conn.execute(
            sa.select(sa.func.count())
            .select_from(pending_sellers)
            .where(pending_sellers.c.account_id == account_id)
        ).scalar_one()
    )


def release(conn: Connection, account_id: str, window: Window, amount: int) -> None:
    conn.execute(
        spend_windows.update()
        .where(
            spend_windows.c.account_id == account_id,
            spend_windows.c.window == window.name,
            spend_windows.c.start == window.start,
        )
        .values(
            spent=sa.case((spend_windows.c.spent < amount, 0), else_=spend_windows.c.spent - amount)
        )
    )


def spent_in(conn: Connection, account_id: str, window: Window) -> int:
    spent = conn.execute(
        sa.select(spend_windows.c.spent).where(
            spend_windows.c.account_id == account_id,
            spend_windows.c.window == window.name,
            spend_windows.c.start == window.start,
        )
    ).scalar_one_or_none()
    return int(spent or 0)


def seller_spent_in(conn: Connection, account_id: str, rule: Rule, window: Window) -> int:
    """What the payments under an allow rule's budget have spent in ``window`` (daily or
    monthly)."""
    table = seller_spend_windows
    spent = conn.execute(
        sa.select(table.c.spent).where(
            table.c.account_id == account_id,
            table.c.host == rule.host,
            table.c.path == rule.path,
            table.c.window == window.name,
            table.c.start == window.start,
        )
    ).scalar_one_or_none()
    return int(spent or 0)


def budgets_of(conn: Connection, account_id: str) -> list[tuple[Rule, SellerBudget]]:
    """The account's allow rules that carry a budget, in the order of their text."""
    rows = conn.execute(
        sa.select(
            policy_rules.c.host,
            policy_rules.c.path,
            policy_rules.c.cap_daily,
            policy_rules.c.cap_monthly,
        ).where(
            policy_rules.c.account_id == account_id,
            policy_rules.c.kind == "allow",
            sa.or_(policy_rules.c.cap_daily.is_not(None), policy_rules.c.cap_monthly.is_not(None)),
        )
    ).all()
    budgets = [(Rule(r.host, r.path), SellerBudget(r.cap_daily, r.cap_monthly)) for r in rows]
    return sorted(budgets, key=lambda budget: str(budget[0]))


def seller_spend_of(
    conn: Connection, account_id: str, day: Window, month: Window
) -> dict[tuple[Rule, str], int]:
    """What each allow rule's budget has spent in ``day`` and ``month``, by (rule, window
    name); a rule nothing was paid under is absent."""
    table = seller_spend_windows
    rows = conn.execute(
        sa.select(table.c.host, table.c.path, table.c.window, table.c.spent).where(
            table.c.account_id == account_id,
            sa.or_(
                sa.and_(table.c.window == day.name, table.c.start == day.start),
                sa.and_(table.c.window == month.name, table.c.start == month.start),
            ),
        )
    ).all()
    return {(Rule(r.host, r.path), r.window): int(r.spent) for r in rows}


@dataclass(frozen=True, slots=True)
class RefusalRecord:
    account_id: str
    api_key_id: str | None
    seller_host: str
    seller_path: str
    network: str
    amount: int
    sandbox: bool
    reason: str
    rule: str | None
    detail: str
    created_at: int


def refusals_of(conn: Connection, account_id: str) -> Iterable[RefusalRecord]:
    rows = conn.execute(
        sa.select(refusals).where(refusals.c.account_id == account_id).order_by(refusals.c.id)
    ).all()
    return [
        RefusalRecord(
            r.account_id,
            r.api_key_id,
            r.seller_host,
            r.seller_path,
            r.network,
            r.amount,
            r.sandbox,
            r.reason,
            r.rule,
            r.detail,
            r.created_at,
        )
        for r in rows
    ]
