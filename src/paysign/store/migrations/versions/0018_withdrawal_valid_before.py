"""A withdrawal keeps its authorization's ``validBefore`` (the chain time after which it can
never move money), so the reconciler can tell a transfer that will never happen from one that
may still be mined; NULL on older rows. An index finds the withdrawals still unsettled.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("withdrawals", sa.Column("valid_before", sa.BigInteger, nullable=True))
    op.create_index("ix_withdrawals_status", "withdrawals", ["status", "network", "id"])


def downgrade() -> None:
    op.drop_index("ix_withdrawals_status", table_name="withdrawals")
    with op.batch_alter_table("withdrawals") as batch:
        batch.drop_column("valid_before")
