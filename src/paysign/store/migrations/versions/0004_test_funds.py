"""Test funds: the per-account grant window and the grant history.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "test_funds",
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("last_granted_at", sa.BigInteger, nullable=True),
        sa.Column("claim_started_at", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("account_id", name="pk_test_funds"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_test_funds_account_id_accounts"
        ),
    )
    op.create_table(
        "test_fund_grants",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("transaction_hash", sa.String(66), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_test_fund_grants"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_test_fund_grants_account_id_accounts"
        ),
    )
    op.create_index("ix_test_fund_grants_account", "test_fund_grants", ["account_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_test_fund_grants_account", table_name="test_fund_grants")
    op.drop_table("test_fund_grants")
    op.drop_table("test_funds")
