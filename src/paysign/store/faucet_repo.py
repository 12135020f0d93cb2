"""The test-funds window: claim, grant, release — each one guarded statement."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from paysign.store.schema import test_fund_grants, test_funds


@dataclass(frozen=True, slots=True)
class FundsWindow:
    last_granted_at: int | None
    claim_started_at: int | None


def try_claim(conn: Connection, account_id: str, now: int, *, window: int, stale: int) -> bool:
    """Take the account's claim unless a grant is inside ``window`` seconds or another claim
    younger than ``stale`` seconds is in flight. Exactly one of any number of racers wins."""
    insert = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(test_funds)
    row = test_funds.c
    statement = (
        insert.values(account_id=account_id, last_granted_at=None, claim_started_at=now)
        .on_conflict_do_update(
            index_elements=[row.account_id],
            set_={"claim_started_at": now},
            where=sa.and_(
                sa.or_(row.last_granted_at.is_(None), row.last_granted_at <= now - window),
                sa.or_(row.claim_started_at.is_(None), row.claim_started_at <= now - stale),
            ),
        )
        .returning(row.account_id)
    )
    return conn.execute(statement).first() is not None


def window_of(conn: Connection, account_id: str) -> FundsWindow:
    found = conn.execute(
        sa.select(test_funds.c.last_granted_at, test_funds.c.claim_started_at).where(
            test_funds.c.account_id == account_id
        )
    ).first()
    return FundsWindow(None, None) if found is None else FundsWindow(*found)


def record_grant(
    conn: Connection, account_id: str, transaction_hash: str, amount: int, status: str, now: int
) -> None:
    """The claim becomes a grant: the window starts now."""
    conn.execute(
        test_funds.update()
        .where(test_funds.c.account_id == account_id)
        .values(last_granted_at=now, claim_started_at=None)
    )
    conn.execute(
        test_fund_grants.insert().values(
            account_id=account_id,
            transaction_hash=transaction_hash,
            amount=amount,
            status=status,
            created_at=now,
        )
    )


def release_claim(conn: Connection, account_id: str) -> None:
    """The transfer failed: give the window back."""
    conn.execute(
        test_funds.update()
        .where(test_funds.c.account_id == account_id)
        .values(claim_started_at=None)
    )
