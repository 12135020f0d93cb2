"""OAuth authorization server: clients, pending requests, codes, tokens, TOTP steps, failures.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _account_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["account_id"], ["accounts.id"], name=f"fk_{table}_account_id_accounts"
    )


def upgrade() -> None:
    op.create_table(
        "oauth_clients",
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("metadata", sa.Text, nullable=False),
        sa.Column("registration_token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("client_id", name="pk_oauth_clients"),
    )
    op.create_table(
        "oauth_requests",
        sa.Column("id_hash", sa.String(64), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("account_id", sa.String(36), nullable=True),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id_hash", name="pk_oauth_requests"),
        _account_fk("oauth_requests"),
    )
    op.create_table(
        "oauth_codes",
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("used_at", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("code_hash", name="pk_oauth_codes"),
        _account_fk("oauth_codes"),
    )
    op.create_table(
        "oauth_tokens",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("family", sa.String(36), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("scopes", sa.String(2100), nullable=False),
        sa.Column("resource", sa.String(2048), nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("rotated_at", sa.BigInteger, nullable=True),
        sa.Column("revoked_at", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("token_hash", name="pk_oauth_tokens"),
        _account_fk("oauth_tokens"),
    )
    op.create_index("ix_oauth_tokens_family", "oauth_tokens", ["family"])
    op.create_table(
        "oauth_totp_steps",
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("last_step", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("account_id", name="pk_oauth_totp_steps"),
        _account_fk("oauth_totp_steps"),
    )
    op.create_table(
        "oauth_sign_in_failures",
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("window_start", sa.BigInteger, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_oauth_sign_in_failures"),
    )


def downgrade() -> None:
    op.drop_table("oauth_sign_in_failures")
    op.drop_table("oauth_totp_steps")
    op.drop_index("ix_oauth_tokens_family", table_name="oauth_tokens")
    op.drop_table("oauth_tokens")
    op.drop_table("oauth_codes")
    op.drop_table("oauth_requests")
    op.drop_table("oauth_clients")
