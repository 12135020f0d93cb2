"""Notification targets, the outbox of events to tell holders about, and its deliveries, over
one open transaction. The signing path writes the outbox itself (``signing_sql``)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store.schema import (
    accounts,
    api_keys,
    notification_deliveries,
    notification_outbox,
    notification_targets,
)

KEY_EXPIRING = "key-expiring"


@dataclass(frozen=True, slots=True)
class Target:
    id: str
    account_id: str
    kind: str  # "webhook" or "email"
    url: str  # a webhook's URL, or an email address
    sealed_secret: bytes | None
    created_at: int


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    account_id: str
    event: str
    seller_host: str
    seller_path: str
    amount: int
    detail: str
    created_at: int


@dataclass(frozen=True, slots=True)
class Delivery:
    id: str
    status: str
    attempts: int
    last_error: str | None
    next_attempt_at: int | None
    created_at: int
    delivered_at: int | None
    target: Target
    event: Event


def add_target(conn: Connection, target: Target) -> None:
    conn.execute(
        sa.insert(notification_targets).values(
            id=target.id,
            account_id=target.account_id,
            kind=target.kind,
            url=target.url,
            sealed_secret=target.sealed_secret,
            created_at=target.created_at,
        )
    )


def _target(row: sa.Row[tuple[object, ...]]) -> Target:
    sealed = row.sealed_secret
    return Target(
        row.id,
        row.account_id,
        row.kind,
        row.url,
        None if sealed is None else bytes(sealed),
        int(row.created_at),
    )


def targets_of(conn: Connection, account_id: str) -> list[Target]:
    t = notification_targets
    rows = conn.execute(
        sa.select(t).where(t.c.account_id == account_id).order_by(t.c.created_at, t.c.id)
    ).all()
    return [_target(row) for row in rows]


def remove_target(conn: Connection, account_id: str, target_id: str) -> bool:
    """Forget the target and its deliveries; False when the account has no such target."""
    t, d = notification_targets, notification_deliveries
    owned = sa.and_(t.c.id == target_id, t.c.account_id == account_id)
    if conn.execute(sa.select(t.c.id).where(owned)).first() is None:
        return False
    conn.execute(sa.delete(d).where(d.c.target_id == target_id))
    conn.execute(sa.delete(t).where(owned))
    return True


def queue_event(
    conn: Connection,
    account_id: str,
    event: str,
    *,
    seller_host: str = "",
    seller_path: str = "",
    amount: int = 0,
    detail: str,
    now: int,
) -> None:
    conn.execute(
        sa.insert(notification_outbox).values(
            account_id=account_id,
            event=event,
            seller_host=seller_host,
            seller_path=seller_path,
            amount=amount,
            detail=detail[:4000],
            created_at=now,
            fanned_out=False,
        )
    )


@dataclass(frozen=True, slots=True)
class ExpiringKey:
    account_id: str
    display_prefix: str
    expires_at: int


def expiring_keys_untold(conn: Connection, now: int, *, within: int) -> list[ExpiringKey]:
    """Active keys expiring in the next ``within`` seconds, of accounts with a target that
    were not told of an expiring key in the past ``within`` seconds (one active key each)."""
    k, t, o = api_keys, notification_targets, notification_outbox
    has_target = sa.exists().where(t.c.account_id == k.c.account_id)
    told = sa.exists().where(
        o.c.account_id == k.c.account_id,
        o.c.event == KEY_EXPIRING,
        o.c.created_at > now - within,
    )
    rows = conn.execute(
        sa.select(k.c.account_id, k.c.display_prefix, k.c.expires_at).where(
            k.c.revoked_at.is_(None),
            k.c.expires_at > now,
            k.c.expires_at <= now + within,
            has_target,
            ~told,
        )
    ).all()
    return [ExpiringKey(r.account_id, r.display_prefix, int(r.expires_at)) for r in rows]


def new_delivery_id() -> str:
    return "msg_" + secrets.token_urlsafe(18)


def fan_out(conn: Connection, now: int, *, limit: int = 200) -> int:
    """One pending delivery per target of the account for each event not yet fanned out (the
    targets the account has now); returns how many events it took."""
    o, t, d = notification_outbox, notification_targets, notification_deliveries
    events = conn.execute(
        sa.select(o.c.id, o.c.account_id)
        .where(o.c.fanned_out == sa.false())
        .order_by(o.c.id)
        .limit(limit)
    ).all()
    for event in events:
        target_ids = conn.execute(
            sa.select(t.c.id).where(t.c.account_id == event.account_id)
        ).scalars()
        for target_id in target_ids.all():
            conn.execute(
                sa.insert(d).values(
                    id=new_delivery_id(),
                    outbox_id=event.id,
                    target_id=target_id,
                    account_id=event.account_id,
                    status="pending",
                    attempts=0,
                    next_attempt_at=now,
                    created_at=now,
                )
            )
        conn.execute(sa.update(o).where(o.c.id == event.id).values(fanned_out=True))
    return len(events)


def _deliveries(where: sa.ColumnElement[bool]) -> sa.Select[tuple[object, ...]]:
    o, t, d = notification_outbox, notification_targets, notification_deliveries
    return (
        sa.select(
            d,
            t.c.kind,
            t.c.url,
            t.c.sealed_secret,
            t.c.created_at.label("target_created_at"),
            o.c.event,
            o.c.seller_host,
            o.c.seller_path,
            o.c.amount,
            o.c.detail,
            o.c.created_at.label("event_created_at"),
        )
        .join(t, t.c.id == d.c.target_id)
        .join(o, o.c.id == d.c.outbox_id)
        .where(where)
    )


def _delivery(row: sa.Row[tuple[object, ...]]) -> Delivery:
    m = row._mapping
    sealed = m["sealed_secret"]
    target = Target(
        m["target_id"],
        m["account_id"],
        m["kind"],
        m["url"],
        None if sealed is None else bytes(sealed),
        int(m["target_created_at"]),
    )
    event = Event(
        int(m["outbox_id"]),
        m["account_id"],
        m["event"],
        m["seller_host"],
        m["seller_path"],
        int(m["amount"]),
        m["detail"],
        int(m["event_created_at"]),
    )
    return Delivery(
        m["id"],
        m["status"],
        int(m["attempts"]),
        m["last_error"],
        m["next_attempt_at"],
        int(m["created_at"]),
        m["delivered_at"],
        target,
        event,
    )


#: Due deliveries of one account taken in one round: what one event to every target makes.
DUE_PER_ACCOUNT = 5


def due_deliveries(
    conn: Connection, now: int, *, limit: int = 50, per_account: int = DUE_PER_ACCOUNT
) -> list[Delivery]:
    """Due deliveries of accounts not disabled, taken round-robin: every account's oldest
    first, then each one's second, and so on, at most ``per_account`` of an account, so one
    account's backlog cannot hold back another's notices. A disabled account's stay pending,
    unsent, until an operator enables it again."""
    d = notification_deliveries
    turn = (
        sa.func.row_number()
        .over(partition_by=d.c.account_id, order_by=(d.c.next_attempt_at, d.c.id))
        .label("turn")
    )
    due = (
        sa.select(d.c.id, d.c.next_attempt_at, turn)
        .join(accounts, accounts.c.id == d.c.account_id)
        .where(
            d.c.status == "pending",
            d.c.next_attempt_at <= now,
            accounts.c.disabled_at.is_(None),
        )
        .subquery()
    )
    taken = (
        sa.select(due.c.id, due.c.turn)
        .where(due.c.turn <= per_account)
        .order_by(due.c.turn, due.c.next_attempt_at, due.c.id)
        .limit(limit)
        .subquery()
    )
    query = _deliveries(d.c.id == taken.c.id).order_by(taken.c.turn, d.c.next_attempt_at, d.c.id)
    return [_delivery(row) for row in conn.execute(query).all()]


def deliveries_of(conn: Connection, account_id: str, *, limit: int = 50) -> list[Delivery]:
    d = notification_deliveries
    query = _deliveries(d.c.account_id == account_id)
    rows = conn.execute(query.order_by(d.c.created_at.desc(), d.c.id).limit(limit)).all()
    return [_delivery(row) for row in rows]


def record_attempt(
    conn: Connection,
    delivery_id: str,
    *,
    now: int,
    error: str | None,
    retry_at: int | None,
) -> None:
    """One attempt more: delivered when ``error`` is None, else pending until ``retry_at`` or
    failed for good when there is none."""
    d = notification_deliveries
    if error is None:
        values: dict[str, object] = {"status": "delivered", "delivered_at": now, "last_error": None}
    else:
        status = "pending" if retry_at is not None else "failed"
        values = {"status": status, "last_error": error[:500]}
    values["next_attempt_at"] = retry_at if error is not None else None
    conn.execute(
        sa.update(d).where(d.c.id == delivery_id).values(attempts=d.c.attempts + 1, **values)
    )
