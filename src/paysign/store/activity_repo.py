"""The activity of one account — signatures, refusals, withdrawals and notification deliveries
as one list — read a page at a time.

An account can hold millions of rows, so nothing here loads them all: one ``UNION ALL`` of the
tables with the filters in ``WHERE``, newest first, and a keyset cursor instead of an offset (an
offset re-reads every skipped row; a cursor starts where the last page ended).

The order and the cursor are in ``activity_rows``; the branches of withdrawals and deliveries in
``activity_outbound``. Each branch reads its table through its ``(account_id, created_at)``
index and stops at the page size; on SQLite that index also holds the rowid (``id``), and
PostgreSQL sorts the few rows of one second incrementally, so no further index is needed.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store import activity_outbound
from paysign.store.activity_rows import (
    MAX_SELLER_FILTER,
    ActivityFilters,
    ActivityRow,
    Cursor,
    Kind,
    position,
    rank_of,
    union_columns,
)
from paysign.store.schema import pending_sellers, refusals, signatures

# What the activity's users name through this module.
__all__ = [
    "MAX_SELLER_FILTER",
    "ActivityFilters",
    "ActivityRow",
    "Cursor",
    "Kind",
    "page",
    "seen_sellers",
]


def _branch(
    table: sa.Table,
    kind: Kind,
    account_id: str,
    filters: ActivityFilters,
    cursor: Cursor | None,
    older: bool,
    limit: int,
) -> sa.Select[tuple[object, ...]]:
    """Signatures or refusals in the activity's columns."""
    c = table.c
    signed = kind == "signed"
    shared = ("id", "created_at", "seller_host", "seller_path", "amount", "network", "sandbox")
    own = (
        ("pay_to", "status", "tier", "nonce", "valid_before", "settled_tx")
        if signed
        else ("reason", "detail")
    )
    columns = union_columns(kind, {name: c[name] for name in (*shared, "rule", *own)})
    where: list[sa.ColumnElement[bool]] = [c.account_id == account_id]
    if filters.seller_contains:
        where.append(
            (c.seller_host + c.seller_path).icontains(filters.seller_contains, autoescape=True)
        )
    if filters.network is not None:
        where.append(c.network == filters.network)
    if filters.sandbox is not None:
        where.append(c.sandbox == filters.sandbox)
    if filters.status is not None and signed:
        where.append(c.status == filters.status)
    if filters.since is not None:
        where.append(c.created_at >= filters.since)
    if filters.until is not None:
        where.append(c.created_at < filters.until)
    if cursor is not None:
        where.append(position(c.created_at, (c.id,), kind, cursor, older))
    order = (c.created_at.desc(), c.id.desc()) if older else (c.created_at.asc(), c.id.asc())
    inner = sa.select(*columns).where(*where).order_by(*order).limit(limit).subquery()
    # Wrapped: SQLite refuses ORDER BY/LIMIT on a member of a compound SELECT.
    return sa.select(inner)


def _query(
    account_id: str,
    filters: ActivityFilters,
    cursor: Cursor | None,
    older: bool,
    limit: int,
) -> sa.Select[tuple[object, ...]] | None:
    """The page's query; None when the filters leave no kind of row to show."""
    sources: tuple[tuple[sa.Table, Kind], ...] = ((signatures, "signed"), (refusals, "refused"))
    branches = [
        _branch(table, kind, account_id, filters, cursor, older, limit)
        for table, kind in sources
        if filters.decision in (None, kind) and (filters.status is None or kind == "signed")
    ]
    outbound = (
        ("withdrawn", activity_outbound.withdrawals_match, activity_outbound.withdrawal_branch),
        ("delivery", activity_outbound.deliveries_match, activity_outbound.delivery_branch),
    )
    for kind, matches, branch in outbound:
        if filters.decision in (None, kind) and matches(filters):
            branches.append(branch(account_id, filters, cursor, older, limit))
    if not branches:
        return None
    united = sa.union_all(*branches).subquery() if len(branches) > 1 else branches[0].subquery()
    direction = sa.desc if older else sa.asc
    keys = (united.c.created_at, rank_of(united.c.kind), united.c.id, united.c.ref)
    return sa.select(united).order_by(*(direction(key) for key in keys)).limit(limit)


def page(
    conn: Connection,
    account_id: str,
    filters: ActivityFilters,
    *,
    limit: int,
    before: Cursor | None = None,
    after: Cursor | None = None,
) -> list[ActivityRow]:
    """Up to ``limit`` rows, newest first: the newest ones, those older than ``before``, or
    the ones just newer than ``after`` (the page before, when paging back)."""
    if before is not None and after is not None:
        raise ValueError("a page is either before or after a position, not both")
    older = after is None
    query = _query(account_id, filters, after or before, older, limit)
    if query is None:
        return []
    found = [_row(r) for r in conn.execute(query).all()]
    return found if older else found[::-1]


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _row(r: sa.Row[tuple[object, ...]]) -> ActivityRow:
    m = r._mapping
    return ActivityRow(
        kind=m["kind"],
        id=int(m["id"]),
        created_at=int(m["created_at"]),
        seller_host=m["seller_host"],
        seller_path=m["seller_path"],
        amount=int(m["amount"]),
        network=m["network"],
        sandbox=bool(m["sandbox"]),
        rule=m["rule"],
        pay_to=m["pay_to"],
        status=m["status"],
        tier=m["tier"],
        nonce=bytes(m["nonce"]) if m["nonce"] is not None else None,
        reason=m["reason"],
        detail=m["detail"],
        valid_before=_optional_int(m["valid_before"]),
        settled_tx=m["settled_tx"],
        by=m["by_email"],
        code_verified_at=_optional_int(m["code_verified_at"]),
        ref=m["ref"],
        target_kind=m["target_kind"],
        # Never the raw URL: a webhook's may carry its credential.
        target=activity_outbound.shown_target(m["target_kind"], m["target_url"]),
        event=m["event"],
        attempts=_optional_int(m["attempts"]),
        last_error=activity_outbound.shown_error(
            m["last_error"], m["target_kind"], m["target_url"]
        ),
        delivered_at=_optional_int(m["delivered_at"]),
        next_attempt_at=_optional_int(m["next_attempt_at"]),
    )


def seen_sellers(
    conn: Connection, account_id: str, host_contains: str, *, scan: int, limit: int
) -> list[tuple[str, str]]:
    """Distinct (host, path) of sellers the account met — in its newest ``scan`` signatures,
    its newest ``scan`` refusals and its pending sellers — whose host contains
    ``host_contains``: a pre-filter for the rule matcher. The newest rows are taken before the
    host is looked at, so the work is bounded whatever the account's size."""
    branches = []
    for table in (signatures, refusals):
        c = table.c
        newest = (
            sa.select(c.seller_host.label("host"), c.seller_path.label("path"))
            .where(c.account_id == account_id)
            .order_by(c.created_at.desc())
            .limit(scan)
            .subquery()
        )
        branches.append(
            sa.select(newest).where(newest.c.host.contains(host_contains, autoescape=True))
        )
    p = pending_sellers.c
    branches.append(
        sa.select(p.host, p.path).where(
            p.account_id == account_id, p.host.contains(host_contains, autoescape=True)
        )
    )
    united = sa.union(*branches).subquery()
    rows = conn.execute(
        sa.select(united.c.host, united.c.path).order_by(united.c.host, united.c.path).limit(limit)
    ).all()
    return [(r.host, r.path) for r in rows]
