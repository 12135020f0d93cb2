"""Withdrawals as rows: recorded before the transfer is submitted, finished with its outcome,
or later with the outcome the reconciler reads from the chain."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store.schema import withdrawals

#: ``submitting`` until the chain answers; then ``sent`` (mined), ``pending`` (submitted, fate
#: unknown) or ``failed`` (nothing moved).
STATUSES = ("submitting", "sent", "pending", "failed")
#: What the chain has yet to decide: the reconciler asks about these.
UNSETTLED = ("submitting", "pending")


@dataclass(frozen=True, slots=True)
class WithdrawalRow:
    id: int
    account_id: str
    created_at: int
    network: str
    sandbox: bool
    from_address: str
    to_address: str
    amount: int
    status: str
    transaction_hash: str | None
    fresh_code: bool


def record(
    conn: Connection,
    *,
    account_id: str,
    created_at: int,
    network: str,
    sandbox: bool,
    from_address: str,
    to_address: str,
    amount: int,
    nonce: bytes,
    valid_before: int,
    fresh_code: bool,
    code_verified_at: int | None = None,
) -> int:
    """A new withdrawal in ``submitting``; its id."""
    inserted = conn.execute(
        withdrawals.insert()
        .values(
            account_id=account_id,
            created_at=created_at,
            network=network,
            sandbox=sandbox,
            from_address=from_address,
            to_address=to_address,
            amount=amount,
            nonce=nonce,
            valid_before=valid_before,
            status="submitting",
            transaction_hash=None,
            fresh_code=fresh_code,
            code_verified_at=code_verified_at,
        )
        .returning(withdrawals.c.id)
    ).scalar_one()
    return int(inserted)


def recorded_since(conn: Connection, account_id: str, since: int) -> list[int]:
    """When each of the account's withdrawals recorded after ``since`` was, oldest first
    (whatever its outcome: each was sent with a fresh code and its gas paid)."""
    c = withdrawals.c
    rows = conn.execute(
        sa.select(c.created_at)
        .where(c.account_id == account_id, c.created_at > since)
        .order_by(c.created_at)
    )
    return [int(created_at) for (created_at,) in rows]


def finish(conn: Connection, withdrawal_id: int, status: str, transaction_hash: str | None) -> None:
    if status not in STATUSES:
        raise ValueError(f"{status!r} is not a withdrawal status")
    conn.execute(
        withdrawals.update()
        .where(withdrawals.c.id == withdrawal_id)
        .values(status=status, transaction_hash=transaction_hash)
    )


@dataclass(frozen=True, slots=True)
class UnsettledWithdrawal:
    """What the reconciler needs to ask the chain about a withdrawal's authorization."""

    id: int
    network: str
    from_address: str
    nonce: bytes
    created_at: int
    valid_before: int | None  # None on rows recorded before it was kept
    status: str
    transaction_hash: str | None


def unsettled(
    conn: Connection, *, network: str, created_before: int, after_id: int = 0, limit: int = 200
) -> list[UnsettledWithdrawal]:
    """Withdrawals on ``network`` still ``submitting`` or ``pending`` and recorded before
    ``created_before``, by id from ``after_id`` (exclusive), at most ``limit``."""
    c = withdrawals.c
    rows = conn.execute(
        sa.select(
            c.id,
            c.network,
            c.from_address,
            c.nonce,
            c.created_at,
            c.valid_before,
            c.status,
            c.transaction_hash,
        )
        .where(
            c.status.in_(UNSETTLED),
            c.network == network,
            c.id > after_id,
            c.created_at < created_before,
        )
        .order_by(c.id)
        .limit(limit)
    )
    return [
        UnsettledWithdrawal(
            id=int(row.id),
            network=row.network,
            from_address=row.from_address,
            nonce=bytes(row.nonce),
            created_at=int(row.created_at),
            valid_before=None if row.valid_before is None else int(row.valid_before),
            status=row.status,
            transaction_hash=row.transaction_hash,
        )
        for row in rows
    ]


def settle(conn: Connection, withdrawal_id: int, status: str, transaction_hash: str | None) -> bool:
    """Move a still unsettled withdrawal to ``sent`` or ``failed``; False when it was already
    settled (by the request that submitted it, or another reconciler)."""
    if status not in ("sent", "failed"):
        raise ValueError(f"{status!r} does not settle a withdrawal")
    moved = conn.execute(
        withdrawals.update()
        .where(withdrawals.c.id == withdrawal_id, withdrawals.c.status.in_(UNSETTLED))
        .values(status=status, transaction_hash=transaction_hash)
    )
    return moved.rowcount == 1


def of_account(conn: Connection, account_id: str, *, limit: int = 50) -> list[WithdrawalRow]:
    """The account's withdrawals, newest first."""
    c = withdrawals.c
    rows = conn.execute(
        sa.select(
            c.id,
            c.account_id,
            c.created_at,
            c.network,
            c.sandbox,
            c.from_address,
            c.to_address,
            c.amount,
            c.status,
            c.transaction_hash,
            c.fresh_code,
        )
        .where(c.account_id == account_id)
        .order_by(c.created_at.desc(), c.id.desc())
        .limit(limit)
    )
    return [
        WithdrawalRow(
            id=int(row.id),
            account_id=row.account_id,
            created_at=int(row.created_at),
            network=row.network,
            sandbox=bool(row.sandbox),
            from_address=row.from_address,
            to_address=row.to_address,
            amount=int(row.amount),
            status=row.status,
            transaction_hash=row.transaction_hash,
            fresh_code=bool(row.fresh_code),
        )
        for row in rows
    ]
