"""Policies can be frozen (every payment refused until the account holder unfreezes them),
carry payee rules (the payTo allow and deny lists, as JSON) and an hourly cap; allow rules can
carry budgets of their own, spent in windows per rule.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "policies",
        sa.Column("frozen", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.add_column("policies", sa.Column("payee_rules", sa.Text, nullable=True))
    op.add_column("policies", sa.Column("cap_hourly", sa.BigInteger, nullable=True))
    op.add_column("policy_rules", sa.Column("cap_daily", sa.BigInteger, nullable=True))
    op.add_column("policy_rules", sa.Column("cap_monthly", sa.BigInteger, nullable=True))
    op.create_table(
        "seller_spend_windows",
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("host", sa.String(300), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("window", sa.String(8), nullable=False),
        sa.Column("start", sa.BigInteger, nullable=False),
        sa.Column("spent", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint(
            "account_id", "host", "path", "window", "start", name="pk_seller_spend_windows"
        ),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_seller_spend_windows_account_id_accounts"
        ),
    )


def downgrade() -> None:
    op.drop_table("seller_spend_windows")
    with op.batch_alter_table("policy_rules") as batch:
        batch.drop_column("cap_monthly")
        batch.drop_column("cap_daily")
    with op.batch_alter_table("policies") as batch:
        batch.drop_column("cap_hourly")
        batch.drop_column("payee_rules")
        batch.drop_column("frozen")
