"""Where each signature stands in its life: ``signed`` (awaiting settlement until its
``validBefore``), then once, by the reconciler, ``settled`` (with the transaction that used it)
or ``expired`` (unused: its spend given back). And the account's spend by that standing."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store.schema import signatures, wallets

AWAITING, SETTLED, EXPIRED = "signed", "settled", "expired"


@dataclass(frozen=True, slots=True)
class DueSignature:
    """An awaiting signature whose fate the chain has not told us yet."""

    id: int
    account_id: str
    network: str
    asset: str
    wallet_address: str
    nonce: bytes
    amount: int
    sandbox: bool
    created_at: int
    valid_before: int
    reserved_in: str | None  # the extra spend windows it counted in (``reserved_windows``)


def signatures_due(
    conn: Connection, *, networks: Collection[str], expired_before: int, after_id: int, limit: int
) -> list[DueSignature]:
    """Awaiting signatures whose ``validBefore`` is before ``expired_before``, oldest first."""
    query = _awaiting(networks).where(
        signatures.c.valid_before < expired_before, signatures.c.id > after_id
    )
    return _due(conn.execute(query.order_by(signatures.c.id).limit(limit)).all())


def signatures_still_valid(
    conn: Connection, *, networks: Collection[str], valid_from: int, limit: int
) -> list[DueSignature]:
    """The ``limit`` most recent awaiting signatures whose ``validBefore`` is at or after
    ``valid_from``: those that may have settled already but cannot yet be called expired."""
    query = _awaiting(networks).where(signatures.c.valid_before >= valid_from)
    return _due(conn.execute(query.order_by(signatures.c.id.desc()).limit(limit)).all())


def _awaiting(networks: Collection[str]) -> sa.Select[Any]:
    return (
        sa.select(
            signatures.c.id,
            signatures.c.account_id,
            signatures.c.network,
            signatures.c.asset,
            wallets.c.address,
            signatures.c.nonce,
            signatures.c.amount,
            signatures.c.sandbox,
            signatures.c.created_at,
            signatures.c.valid_before,
            signatures.c.reserved_in,
        )
        .select_from(signatures.join(wallets, wallets.c.account_id == signatures.c.account_id))
        .where(signatures.c.status == AWAITING, signatures.c.network.in_(list(networks)))
    )


def _due(rows: Sequence[sa.Row[Any]]) -> list[DueSignature]:
    return [
        DueSignature(
            int(r.id),
            r.account_id,
            r.network,
            r.asset,
            r.address,
            bytes(r.nonce),
            int(r.amount),
            bool(r.sandbox),
            int(r.created_at),
            int(r.valid_before),
            r.reserved_in,
        )
        for r in rows
    ]


def mark_settled(conn: Connection, signature_id: int, transaction: str | None) -> bool:
    """Move an awaiting signature to ``settled``, once: True if this call did it."""
    return _conclude(conn, signature_id, status=SETTLED, settled_tx=transaction)


def mark_expired(conn: Connection, signature_id: int) -> bool:
    """Move an awaiting signature to ``expired``, once: True if this call did it (so the release
    of its spend that follows happens exactly once, however many reconcilers run)."""
    return _conclude(conn, signature_id, status=EXPIRED)


def _conclude(conn: Connection, signature_id: int, **values: str | None) -> bool:
    result = conn.execute(
        signatures.update()
        .where(signatures.c.id == signature_id, signatures.c.status == AWAITING)
        .values(**values)
    )
    return result.rowcount == 1


@dataclass(frozen=True, slots=True)
class SpendByStatus:
    """Signed amounts in base units, live and sandbox apart, by where the signatures stand."""

    settled: int = 0
    awaiting: int = 0  # reserved: may still settle
    expired: int = 0  # given back
    sandbox_settled: int = 0
    sandbox_awaiting: int = 0


def spend_by_status(conn: Connection, account_id: str, since: int) -> SpendByStatus:
    """The account's signatures made at or after ``since``, summed by status."""
    c = signatures.c
    rows = conn.execute(
        sa.select(c.sandbox, c.status, sa.func.coalesce(sa.func.sum(c.amount), 0))
        .where(c.account_id == account_id, c.created_at >= since)
        .group_by(c.sandbox, c.status)
    ).all()
    sums = {(bool(sandbox), status): int(total) for sandbox, status, total in rows}
    return SpendByStatus(
        settled=sums.get((False, SETTLED), 0),
        awaiting=sums.get((False, AWAITING), 0),
        expired=sums.get((False, EXPIRED), 0),
        sandbox_settled=sums.get((True, SETTLED), 0),
        sandbox_awaiting=sums.get((True, AWAITING), 0),
    )
