"""Policy, rules, pending sellers, spend windows and refusals, over one open transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from paysign.policy.caps import Caps, Window
from paysign.policy.decide import MAX_PENDING_SELLERS, Approval, PolicySettings
from paysign.policy.document import PolicyDocument
from paysign.policy.rules import Rule
from paysign.policy.seller import SellerLocation
from paysign.store.schema import pending_sellers, policies, policy_rules, refusals, spend_windows

_PENDING_ORDER = (pending_sellers.c.first_seen, pending_sellers.c.host, pending_sellers.c.path)

POLICY_COLUMNS = (
    policies.c.approval,
    policies.c.premium,
    policies.c.standard,
    policies.c.open_ecosystem,
    policies.c.cap_per_payment,
    policies.c.cap_daily,
    policies.c.cap_monthly,
)


def settings_from_values(values: Sequence[Any]) -> PolicySettings:
    """Settings from the POLICY_COLUMNS values of a row; no row (all None) means defaults."""
    approval, premium, standard, open_ecosystem, per_payment, daily, monthly = values
    if approval is None:
        return PolicySettings.defaults()
    return PolicySettings(
        Approval(approval),
        bool(premium),
        bool(standard),
        bool(open_ecosystem),
        Caps(per_payment, daily, monthly),
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
        sa.select(policy_rules.c.kind, policy_rules.c.host, policy_rules.c.path)
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
        "updated_at": now,
    }
    stmt = _upsert(conn, policies).values(account_id=account_id, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=[policies.c.account_id], set_=values))


def replace_rules(conn: Connection, account_id: str, doc: PolicyDocument, now: int) -> None:
    conn.execute(policy_rules.delete().where(policy_rules.c.account_id == account_id))
    rows = [
        {"account_id": account_id, "kind": kind, "host": r.host, "path": r.path, "created_at": now}
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
