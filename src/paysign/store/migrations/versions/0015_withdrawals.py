"""Withdrawals: USDC the holder sent out of the custodial wallet, with the transaction that
carried it and the authenticator step-up that allowed it (the audit trail of a withdrawal).

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "withdrawals",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("network", sa.String(32), nullable=False),
        sa.Column("sandbox", sa.Boolean, nullable=False),
        sa.Column("from_address", sa.String(42), nullable=False),
        sa.Column("to_address", sa.String(42), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("nonce", sa.LargeBinary(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("transaction_hash", sa.String(66), nullable=True),
        sa.Column("fresh_code", sa.Boolean, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_withdrawals"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_withdrawals_account_id_accounts"
        ),
    )
    op.create_index("ix_withdrawals_account", "withdrawals", ["account_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_withdrawals_account", table_name="withdrawals")
    op.drop_table("withdrawals")
