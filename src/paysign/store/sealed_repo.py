"""The columns that hold sealed secrets (``custody.SealedSecret.to_bytes()``), read and re-written
without knowing what is inside: which key-encryption keys wrap them, page by page, and a
compare-and-set replacement, so a rotation never overwrites a secret changed meanwhile.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store.schema import accounts, notification_targets, oauth_tokens, wallets

# A sealed blob starts: version (1 byte), len(kek_id) (2 bytes), len(wrapped key) (2 bytes),
# then the kek_id. SQL's substr counts from 1.
_KEK_ID_LENGTH_AT = 2
_KEK_ID_AT = 6


@dataclass(frozen=True, slots=True)
class SealedColumn:
    """One column of sealed secrets, its rows named by ``key``. A ``required`` secret must
    open for the service to work (a wallet key); the others are conveniences that fail soft
    (a refresh token's successor key: without it a retried refresh revokes the grant)."""

    name: str  # what a secret of this column is, for reports: "wallet", "totp", "refresh"
    table: sa.Table
    column: str
    key: str = "id"
    required: bool = True

    @property
    def sealed(self) -> sa.Column[bytes]:
        return self.table.c[self.column]

    @property
    def row_key(self) -> sa.Column[str]:
        return self.table.c[self.key]


WALLET_KEYS = SealedColumn("wallet", wallets, "sealed_key")
TOTP_SECRETS = SealedColumn("totp", accounts, "sealed_totp_secret")
REFRESH_SUCCESSOR_KEYS = SealedColumn(
    "refresh", oauth_tokens, "successor_key", key="token_hash", required=False
)
# A webhook's signing secret: without it that webhook's deliveries fail (and say so on the
# notifications page); the service itself works on.
WEBHOOK_SECRETS = SealedColumn("webhook", notification_targets, "sealed_secret", required=False)
SEALED_COLUMNS = (WALLET_KEYS, TOTP_SECRETS, REFRESH_SUCCESSOR_KEYS, WEBHOOK_SECRETS)
REQUIRED_COLUMNS = tuple(column for column in SEALED_COLUMNS if column.required)


def _int(value: int) -> sa.ColumnElement[int]:
    # Inlined: PostgreSQL's substr(bytea, int, int) takes no parameter of an unknown type.
    return sa.literal(value, sa.Integer, literal_execute=True)


def kek_ids(conn: Connection, column: SealedColumn) -> Counter[str]:
    """How many secrets of the column each key-encryption key wraps (by its id), counted by
    the database: nothing sealed leaves it."""
    length_field = sa.func.substr(column.sealed, _int(_KEK_ID_LENGTH_AT), _int(2))
    found: Counter[str] = Counter()
    lengths = sa.select(length_field).where(column.sealed.is_not(None)).distinct()
    for raw in conn.execute(lengths).scalars():
        length = int.from_bytes(bytes(raw), "big")
        kek_id = sa.func.substr(column.sealed, _int(_KEK_ID_AT), _int(length))
        rows = conn.execute(
            sa.select(kek_id, sa.func.count()).where(length_field == bytes(raw)).group_by(kek_id)
        )
        for kek, count in rows:
            found[bytes(kek).decode("ascii", errors="replace")] += int(count)
    return found


def one_sealed_with(
    conn: Connection, column: SealedColumn, kek_id: str
) -> tuple[str, bytes] | None:
    """A row of the column whose secret ``kek_id`` wraps: (id, sealed bytes)."""
    encoded = kek_id.encode("ascii")
    prefix = sa.func.substr(column.sealed, _int(_KEK_ID_AT), _int(len(encoded)))
    length_field = sa.func.substr(column.sealed, _int(_KEK_ID_LENGTH_AT), _int(2))
    row = conn.execute(
        sa.select(column.row_key, column.sealed)
        .where(length_field == len(encoded).to_bytes(2, "big"), prefix == encoded)
        .limit(1)
    ).first()
    return None if row is None else (row[0], bytes(row[1]))


def page(
    conn: Connection, column: SealedColumn, *, after_id: str, limit: int
) -> list[tuple[str, bytes]]:
    """Rows holding a secret, in key order after ``after_id``: a walk that an interruption
    can resume."""
    rows = conn.execute(
        sa.select(column.row_key, column.sealed)
        .where(column.row_key > after_id, column.sealed.is_not(None))
        .order_by(column.row_key)
        .limit(limit)
    ).all()
    return [(row[0], bytes(row[1])) for row in rows]


def find_sealed(conn: Connection, column: SealedColumn, row_id: str) -> bytes | None:
    found = conn.execute(sa.select(column.sealed).where(column.row_key == row_id)).first()
    return None if found is None or found[0] is None else bytes(found[0])


def replace_sealed(
    conn: Connection, column: SealedColumn, row_id: str, *, old: bytes, new: bytes
) -> bool:
    """Write ``new`` only if the row still holds ``old``; ``False`` if it changed meanwhile."""
    result = conn.execute(
        column.table.update()
        .where(column.row_key == row_id, column.sealed == old)
        .values({column.column: new})
    )
    return result.rowcount == 1
