"""The activity of one account — signatures and refusals as one list — read a page at a time.

An account can hold millions of rows, so nothing here loads them all: one ``UNION ALL`` of the
two tables with the filters in ``WHERE``, newest first, and a keyset cursor instead of an
offset (an offset re-reads every skipped row; a cursor starts where the last page ended).

The order is ``created_at`` descending, then refusals before signatures (within one second a
refusal was listed first before this module existed; it stays so), then ``id`` descending. Each
branch reads its table through its ``(account_id, created_at)`` index and stops at the page
size; on SQLite that index also holds the rowid (``id``), and PostgreSQL sorts the few rows of
one second incrementally, so no further index is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store.schema import pending_sellers, refusals, signatures, withdrawals

Kind = Literal["signed", "refused", "withdrawn"]
# Position at equal created_at: higher comes first (newest-first order).
_RANK: dict[Kind, int] = {"withdrawn": 2, "refused": 1, "signed": 0}
MAX_SELLER_FILTER = 300


@dataclass(frozen=True, slots=True)
class ActivityFilters:
    """What to show; ``None`` means no filter. ``since`` is inclusive, ``until`` exclusive."""

    decision: Kind | None = None
    seller_contains: str | None = None
    network: str | None = None
    sandbox: bool | None = None
    since: int | None = None
    until: int | None = None
    #: A signature's standing (``signed`` awaiting settlement, ``settled``, ``expired``): only
    #: signatures have one, so it shows no refusals.
    status: str | None = None


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """A row's place in the list: (created_at, rank of its kind, id)."""

    created_at: int
    kind: Kind
    id: int

    def token(self) -> str:
        """For a URL: ``1790000000-r-42``.

        >>> Cursor.parse(Cursor(1790000000, "refused", 42).token())
        Cursor(created_at=1790000000, kind='refused', id=42)
        """
        return f"{self.created_at}-{self.kind[0]}-{self.id}"

    @classmethod
    def parse(cls, token: str) -> Cursor:
        """``ValueError`` unless ``token`` came from :meth:`token`."""
        created, _, rest = token.partition("-")
        letter, _, ident = rest.partition("-")
        kinds: dict[str, Kind] = {"s": "signed", "r": "refused", "w": "withdrawn"}
        if letter not in kinds or not all(
            part.isascii() and part.isdigit() and len(part) <= 18 for part in (created, ident)
        ):
            raise ValueError(f"{token[:40]!r} is not a position in the activity list")
        return cls(int(created), kinds[letter], int(ident))


@dataclass(frozen=True, slots=True)
class ActivityRow:
    kind: Kind
    id: int
    created_at: int
    seller_host: str
    seller_path: str
    amount: int
    network: str
    sandbox: bool
    rule: str | None
    pay_to: str | None  # signatures only
    status: str | None  # signatures only
    tier: str | None  # signatures only
    nonce: bytes | None  # signatures only
    reason: str | None  # refusals only
    detail: str | None  # refusals only
    valid_before: int | None = None  # signatures only
    settled_tx: str | None = None  # settled signatures and withdrawals

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.created_at, self.kind, self.id)

    @property
    def seller(self) -> str:
        return f"{self.seller_host}{self.seller_path}"


def _position(table: sa.Table, kind: Kind, cursor: Cursor, older: bool) -> sa.ColumnElement[bool]:
    """Rows of ``table`` strictly older (or newer) than ``cursor``, written so the
    ``(account_id, created_at)`` index bounds the scan: the rank of a table is a constant, so
    the three-part comparison reduces to a range on ``created_at`` plus, at most, ``id``."""
    created, ident = table.c.created_at, table.c.id
    mine, theirs = _RANK[kind], _RANK[cursor.kind]
    if older:
        if mine < theirs:
            return created <= cursor.created_at
        if mine > theirs:
            return created < cursor.created_at
        return sa.and_(
            created <= cursor.created_at,
            sa.or_(created < cursor.created_at, ident < cursor.id),
        )
    if mine > theirs:
        return created >= cursor.created_at
    if mine < theirs:
        return created > cursor.created_at
    return sa.and_(
        created >= cursor.created_at,
        sa.or_(created > cursor.created_at, ident > cursor.id),
    )


def _branch(
    table: sa.Table,
    kind: Kind,
    account_id: str,
    filters: ActivityFilters,
    cursor: Cursor | None,
    older: bool,
    limit: int,
) -> sa.Select[tuple[object, ...]]:
    c = table.c
    signed = kind == "signed"
    text, binary = sa.String(), sa.LargeBinary()
    # Both branches have the same columns; a column the table lacks is a NULL of its type
    # (PostgreSQL will not unite an untyped NULL with bytea).
    columns = [
        sa.literal(kind, text).label("kind"),
        c.id,
        c.created_at,
        c.seller_host,
        c.seller_path,
        c.amount,
        c.network,
        c.sandbox,
        c.rule,
        c.pay_to if signed else sa.cast(sa.null(), text).label("pay_to"),
        c.status if signed else sa.cast(sa.null(), text).label("status"),
        c.tier if signed else sa.cast(sa.null(), text).label("tier"),
        c.nonce if signed else sa.cast(sa.null(), binary).label("nonce"),
        sa.cast(sa.null(), text).label("reason") if signed else c.reason,
        sa.cast(sa.null(), text).label("detail") if signed else c.detail,
        c.valid_before if signed else sa.cast(sa.null(), sa.BigInteger()).label("valid_before"),
        c.settled_tx if signed else sa.cast(sa.null(), text).label("settled_tx"),
    ]
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
        where.append(_position(table, kind, cursor, older))
    order = (c.created_at.desc(), c.id.desc()) if older else (c.created_at.asc(), c.id.asc())
    inner = sa.select(*columns).where(*where).order_by(*order).limit(limit).subquery()
    # Wrapped: SQLite refuses ORDER BY/LIMIT on a member of a compound SELECT.
    return sa.select(inner)


def _withdrawal_branch(
    account_id: str,
    filters: ActivityFilters,
    cursor: Cursor | None,
    older: bool,
    limit: int,
) -> sa.Select[tuple[object, ...]]:
    """Withdrawals in the activity's columns: no seller, the destination as ``pay_to``, the
    transaction as ``settled_tx``, and in ``detail`` how the holder confirmed it."""
    c = withdrawals.c
    text = sa.String()
    columns = [
        sa.literal("withdrawn", text).label("kind"),
        c.id,
        c.created_at,
        sa.literal("", text).label("seller_host"),
        sa.literal("", text).label("seller_path"),
        c.amount,
        c.network,
        c.sandbox,
        sa.cast(sa.null(), text).label("rule"),
        c.to_address.label("pay_to"),
        c.status,
        sa.cast(sa.null(), text).label("tier"),
        c.nonce,
        sa.cast(sa.null(), text).label("reason"),
        sa.case(
            (c.fresh_code, sa.literal("confirmed with a fresh authenticator code", text)),
            else_=sa.literal("confirmed without an authenticator code", text),
        ).label("detail"),
        sa.cast(sa.null(), sa.BigInteger()).label("valid_before"),
        c.transaction_hash.label("settled_tx"),
    ]
    where: list[sa.ColumnElement[bool]] = [c.account_id == account_id]
    if filters.network is not None:
        where.append(c.network == filters.network)
    if filters.sandbox is not None:
        where.append(c.sandbox == filters.sandbox)
    if filters.since is not None:
        where.append(c.created_at >= filters.since)
    if filters.until is not None:
        where.append(c.created_at < filters.until)
    if cursor is not None:
        where.append(_position(withdrawals, "withdrawn", cursor, older))
    order = (c.created_at.desc(), c.id.desc()) if older else (c.created_at.asc(), c.id.asc())
    inner = sa.select(*columns).where(*where).order_by(*order).limit(limit).subquery()
    return sa.select(inner)


def _query(
    account_id: str,
    filters: ActivityFilters,
    cursor: Cursor | None,
    older: bool,
    limit: int,
) -> sa.Select[tuple[object, ...]]:
    sources: tuple[tuple[sa.Table, Kind], ...] = ((signatures, "signed"), (refusals, "refused"))
    branches = [
        _branch(table, kind, account_id, filters, cursor, older, limit)
        for table, kind in sources
        if filters.decision in (None, kind) and (filters.status is None or kind == "signed")
    ]
    # A withdrawal has no seller and no signature status: those filters leave it out.
    if filters.decision in (None, "withdrawn") and _withdrawals_match(filters):
        branches.append(_withdrawal_branch(account_id, filters, cursor, older, limit))
    united = sa.union_all(*branches).subquery() if len(branches) > 1 else branches[0].subquery()
    rank = sa.case((united.c.kind == "withdrawn", 2), (united.c.kind == "refused", 1), else_=0)
    direction = sa.desc if older else sa.asc
    return (
        sa.select(united)
        .order_by(direction(united.c.created_at), direction(rank), direction(united.c.id))
        .limit(limit)
    )


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
    if filters.decision == "refused" and filters.status is not None:
        return []  # a refusal has no settlement status
    if filters.decision == "withdrawn" and not _withdrawals_match(filters):
        return []
    older = after is None
    rows = conn.execute(_query(account_id, filters, after or before, older, limit)).all()
    found = [
        ActivityRow(
            kind=r.kind,
            id=int(r.id),
            created_at=int(r.created_at),
            seller_host=r.seller_host,
            seller_path=r.seller_path,
            amount=int(r.amount),
            network=r.network,
            sandbox=bool(r.sandbox),
            rule=r.rule,
            pay_to=r.pay_to,
            status=r.status,
            tier=r.tier,
            nonce=bytes(r.nonce) if r.nonce is not None else None,
            reason=r.reason,
            detail=r.detail,
            valid_before=int(r.valid_before) if r.valid_before is not None else None,
            settled_tx=r.settled_tx,
        )
        for r in rows
    ]
    return found if older else found[::-1]


def _withdrawals_match(filters: ActivityFilters) -> bool:
    return filters.status is None and not filters.seller_contains


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
