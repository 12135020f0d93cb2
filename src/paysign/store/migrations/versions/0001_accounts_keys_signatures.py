"""Accounts, wallets, API keys and the signature ledger.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("password_hash", sa.String(200), nullable=False),
        sa.Column("sealed_totp_secret", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_accounts"),
        sa.UniqueConstraint("email", name="uq_accounts_email"),
    )
    op.create_table(
        "wallets",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("address", sa.String(42), nullable=False),
        sa.Column("sealed_key", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_wallets"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_wallets_account_id_accounts"
        ),
        sa.UniqueConstraint("account_id", name="uq_wallets_account_id"),
        sa.UniqueConstraint("address", name="uq_wallets_address"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("key_hash", sa.LargeBinary(32), nullable=False),
        sa.Column("display_prefix", sa.String(16), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("revoked_at", sa.BigInteger, nullable=True),
        sa.Column("last_used_at", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_api_keys_account_id_accounts"
        ),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_index(
        "uq_api_keys_one_unrevoked",
        "api_keys",
        ["account_id"],
        unique=True,
        sqlite_where=sa.text("revoked_at IS NULL"),
        postgresql_where=sa.text("revoked_at IS NULL"),
    )
    op.create_table(
        "signatures",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("api_key_id", sa.String(36), nullable=True),
        sa.Column("seller_host", sa.String(255), nullable=False),
        sa.Column("seller_path", sa.String(2048), nullable=False),
        sa.Column("network", sa.String(32), nullable=False),
        sa.Column("asset", sa.String(42), nullable=False),
        sa.Column("pay_to", sa.String(42), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("nonce", sa.LargeBinary(32), nullable=False),
        sa.Column("valid_before", sa.BigInteger, nullable=False),
        sa.Column("sandbox", sa.Boolean, nullable=False),
        sa.Column("x402_version", sa.SmallInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="signed"),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_signatures"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_signatures_account_id_accounts"
        ),
        sa.ForeignKeyConstraint(
            ["api_key_id"], ["api_keys.id"], name="fk_signatures_api_key_id_api_keys"
        ),
        sa.UniqueConstraint("nonce", name="uq_signatures_nonce"),
    )
    op.create_index("ix_signatures_account_created", "signatures", ["account_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_signatures_account_created", table_name="signatures")
    op.drop_table("signatures")
    op.drop_index("uq_api_keys_one_unrevoked", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("wallets")
    op.drop_table("accounts")
