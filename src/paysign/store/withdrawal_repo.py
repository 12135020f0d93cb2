"""Withdrawals as rows: recorded before the transfer is submitted, finished with its outcome."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store.schema import withdrawals

#: ``submitting`` until the chain answers; then ``sent`` (mined), ``pending`` (submitted, fate
#: unknown) or ``failed`` (nothing moved).
STATUSES = ("submitting", "sent", "pending", "failed")


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
    fresh_code: bool,
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
            status="submitting",
            transaction_hash=None,
            fresh_code=fresh_code,
        )
        .returning(withdrawals.c.id)
    ).scalar_one()
    return int(inserted)


def finish(conn: Connection, withdrawal_id: int, status: str, transaction_hash: str | None) -> None:
    if status not in STATUSES:
        raise ValueError(f"{status!r} is not a withdrawal status")
    conn.execute(
        withdrawals.update()
        .where(withdrawals.c.id == withdrawal_id)
        .values(status=status, transaction_hash=transaction_hash)
    )


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
