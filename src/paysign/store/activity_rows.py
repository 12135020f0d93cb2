"""What the activity list is made of: its kinds of row, its filters, a row's place in the list
(the keyset cursor) and the columns every kind's branch of the ``UNION ALL`` shares.

The order is ``created_at`` descending, then the kind's rank (a delivery before the withdrawal
or refusal of its second, a refusal before a signature), then ``id`` descending and, for
deliveries (whose own key is text), the delivery's id descending.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

Kind = Literal["signed", "refused", "withdrawn", "delivery"]
# Position at equal created_at: higher comes first (newest-first order).
RANK: dict[Kind, int] = {"delivery": 3, "withdrawn": 2, "refused": 1, "signed": 0}
_LETTERS: dict[str, Kind] = {"s": "signed", "r": "refused", "w": "withdrawn", "d": "delivery"}
_REF = re.compile(r"[A-Za-z0-9_-]{1,40}")
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
    #: signatures have one, so it shows nothing else.
    status: str | None = None


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """A row's place in the list: (created_at, rank of its kind, id, ref). ``ref`` is a
    delivery's own id (``id`` is then its event's); empty for every other kind."""

    created_at: int
    kind: Kind
    id: int
    ref: str = ""

    def token(self) -> str:
        """For a URL: ``1790000000-r-42``, or ``1790000000-d-7-msg_x`` for a delivery.

        >>> Cursor.parse(Cursor(1790000000, "refused", 42).token())
        Cursor(created_at=1790000000, kind='refused', id=42, ref='')
        >>> Cursor.parse("1790000000-d-7-msg_a-b").ref
        'msg_a-b'
        """
        tail = f"-{self.ref}" if self.kind == "delivery" else ""
        return f"{self.created_at}-{self.kind[0]}-{self.id}{tail}"

    @classmethod
    def parse(cls, token: str) -> Cursor:
        """``ValueError`` unless ``token`` came from :meth:`token`."""
        created, _, rest = token.partition("-")
        letter, _, ident = rest.partition("-")
        ref = ""
        if letter == "d":
            ident, _, ref = ident.partition("-")
        well_formed = (
            letter in _LETTERS
            and all(
                part.isascii() and part.isdigit() and len(part) <= 18 for part in (created, ident)
            )
            and (letter != "d" or _REF.fullmatch(ref) is not None)
        )
        if not well_formed:
            raise ValueError(f"{token[:40]!r} is not a position in the activity list")
        return cls(int(created), _LETTERS[letter], int(ident), ref)


@dataclass(frozen=True, slots=True)
class ActivityRow:
    kind: Kind
    id: int  # a delivery's: its event's (the outbox row)
    created_at: int
    seller_host: str
    seller_path: str
    amount: int
    network: str
    sandbox: bool
    rule: str | None
    pay_to: str | None  # signatures and withdrawals
    status: str | None  # signatures, withdrawals and deliveries (as stored)
    tier: str | None  # signatures only
    nonce: bytes | None  # signatures and withdrawals
    reason: str | None  # refusals only
    detail: str | None  # refusals and withdrawals
    valid_before: int | None = None  # signatures only
    settled_tx: str | None = None  # settled signatures and withdrawals
    #: Withdrawals: the holder's email, and when the fresh authenticator code that confirmed
    #: it was verified (None on rows older than that record).
    by: str | None = None
    code_verified_at: int | None = None
    #: Deliveries: their own id, the target as it may be shown (a webhook's URL without the
    #: credentials it may carry, or an email address), the event, and how it went.
    ref: str = ""
    target_kind: str | None = None
    target: str | None = None
    event: str | None = None
    attempts: int | None = None
    last_error: str | None = None
    delivered_at: int | None = None
    next_attempt_at: int | None = None

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.created_at, self.kind, self.id, self.ref)

    @property
    def seller(self) -> str:
        return f"{self.seller_host}{self.seller_path}"


_TEXT, _BIG, _INT = sa.String(), sa.BigInteger(), sa.Integer()
#: Every column of the union, in order, with its type: a branch names what its table has and
#: the rest are NULLs of the type (PostgreSQL will not unite an untyped NULL with bytea).
COLUMNS: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (
    ("kind", _TEXT),
    ("id", _BIG),
    ("ref", _TEXT),
    ("created_at", _BIG),
    ("seller_host", _TEXT),
    ("seller_path", _TEXT),
    ("amount", _BIG),
    ("network", _TEXT),
    ("sandbox", sa.Boolean()),
    ("rule", _TEXT),
    ("pay_to", _TEXT),
    ("status", _TEXT),
    ("tier", _TEXT),
    ("nonce", sa.LargeBinary()),
    ("reason", _TEXT),
    ("detail", _TEXT),
    ("valid_before", _BIG),
    ("settled_tx", _TEXT),
    ("by_email", _TEXT),
    ("code_verified_at", _BIG),
    ("target_kind", _TEXT),
    ("target_url", _TEXT),
    ("event", _TEXT),
    ("attempts", _INT),
    ("last_error", _TEXT),
    ("delivered_at", _BIG),
    ("next_attempt_at", _BIG),
)


def union_columns(kind: Kind, given: Mapping[str, sa.ColumnElement[Any]]) -> list[sa.Label[Any]]:
    """The union's columns for one branch: ``given`` where the table has them, NULL elsewhere;
    ``kind`` and ``ref`` (empty) are filled in unless given."""
    given = {"kind": sa.literal(kind, _TEXT), "ref": sa.literal("", _TEXT), **given}
    unknown = given.keys() - {name for name, _ in COLUMNS}
    if unknown:
        raise ValueError(f"not columns of the activity: {sorted(unknown)}")
    return [
        given[name].label(name) if name in given else sa.cast(sa.null(), kind_of).label(name)
        for name, kind_of in COLUMNS
    ]


def rank_of(kind: sa.ColumnElement[str]) -> sa.ColumnElement[int]:
    """The rank of a united row's kind, for the outer ``ORDER BY``."""
    return sa.case(*((kind == name, rank) for name, rank in RANK.items() if rank), else_=0)


def position(
    created: sa.ColumnElement[int],
    keys: tuple[sa.ColumnElement[object], ...],
    kind: Kind,
    cursor: Cursor,
    older: bool,
) -> sa.ColumnElement[bool]:
    """Rows of one branch strictly older (or newer) than ``cursor``, written so the branch's
    ``(account_id, created_at)`` index bounds the scan: the rank of a branch is a constant, so
    the comparison reduces to a range on ``created_at`` plus, at most, the tie-breaking
    ``keys`` (``id``, and a delivery's own id) compared with the cursor's."""
    mine, theirs = RANK[kind], RANK[cursor.kind]
    values: tuple[object, ...] = (cursor.id, cursor.ref)[: len(keys)]
    if mine != theirs:
        comes_after = mine < theirs if older else mine > theirs
        if comes_after:
            return created <= cursor.created_at if older else created >= cursor.created_at
        return created < cursor.created_at if older else created > cursor.created_at
    # Lexicographic: (k0, k1) < (v0, v1) is k0 < v0 or (k0 = v0 and k1 < v1).
    beyond: sa.ColumnElement[bool] | None = None
    for key, value in reversed(list(zip(keys, values, strict=True))):
        step = key < value if older else key > value
        beyond = step if beyond is None else sa.or_(step, sa.and_(key == value, beyond))
    assert beyond is not None, "a branch breaks ties on at least its id"
    if older:
        return sa.and_(created <= cursor.created_at, sa.or_(created < cursor.created_at, beyond))
    return sa.and_(created >= cursor.created_at, sa.or_(created > cursor.created_at, beyond))
