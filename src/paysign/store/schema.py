"""Tables, as SQLAlchemy Core: the hot path issues hand-shaped statements, not ORM units.

Times are integer Unix seconds (UTC) in every table: identical on SQLite and PostgreSQL,
compared without time-zone surprises. Money is an integer of USDC base units.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
    }
)

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit identity.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("email", sa.String(320), nullable=False, unique=True),
    sa.Column("password_hash", sa.String(200), nullable=False),
    sa.Column("sealed_totp_secret", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

wallets = sa.Table(
    "wallets",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False, unique=True),
    sa.Column("address", sa.String(42), nullable=False, unique=True),
    sa.Column("sealed_key", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("key_hash", sa.LargeBinary(32), nullable=False, unique=True),
    sa.Column("display_prefix", sa.String(16), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("revoked_at", sa.BigInteger, nullable=True),
    sa.Column("last_used_at", sa.BigInteger, nullable=True),
)
# "At most one active key per account" is the database's job, so it holds under concurrency and
# across processes. An expired key is retired (revoked_at set) before a new one is inserted.
sa.Index(
    "uq_api_keys_one_unrevoked",
    api_keys.c.account_id,
    unique=True,
    sqlite_where=api_keys.c.revoked_at.is_(None),
    postgresql_where=api_keys.c.revoked_at.is_(None),
)

signatures = sa.Table(
    "signatures",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("api_key_id", sa.ForeignKey("api_keys.id"), nullable=True),
    sa.Column("seller_host", sa.String(255), nullable=False),
    sa.Column("seller_path", sa.String(2048), nullable=False),
    sa.Column("network", sa.String(32), nullable=False),
    sa.Column("asset", sa.String(42), nullable=False),
    sa.Column("pay_to", sa.String(42), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("nonce", sa.LargeBinary(32), nullable=False, unique=True),
    sa.Column("valid_before", sa.BigInteger, nullable=False),
    sa.Column("sandbox", sa.Boolean, nullable=False),
    sa.Column("x402_version", sa.SmallInteger, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="signed"),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)
sa.Index("ix_signatures_account_created", signatures.c.account_id, signatures.c.created_at)
