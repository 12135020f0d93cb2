"""The activity audits withdrawals and notification deliveries: a withdrawal keeps when the
fresh authenticator code that confirmed it was verified (NULL on older rows), and an account's
deliveries are read newest first through ``(account_id, created_at)``, which replaces the index
on ``account_id`` alone.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("withdrawals", sa.Column("code_verified_at", sa.BigInteger, nullable=True))
    op.create_index(
        "ix_notification_deliveries_account_created",
        "notification_deliveries",
        ["account_id", "created_at"],
    )
    op.drop_index("ix_notification_deliveries_account_id", table_name="notification_deliveries")


def downgrade() -> None:
    op.create_index(
        "ix_notification_deliveries_account_id", "notification_deliveries", ["account_id"]
    )
    op.drop_index(
        "ix_notification_deliveries_account_created", table_name="notification_deliveries"
    )
    with op.batch_alter_table("withdrawals") as batch:
        batch.drop_column("code_verified_at")
