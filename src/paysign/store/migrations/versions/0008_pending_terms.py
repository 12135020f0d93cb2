"""Pending sellers keep the terms of their latest refused payment (payTo, amount, network).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pending_sellers", sa.Column("pay_to", sa.String(42), nullable=True))
    op.add_column("pending_sellers", sa.Column("amount", sa.BigInteger, nullable=True))
    op.add_column("pending_sellers", sa.Column("network", sa.String(32), nullable=True))


def downgrade() -> None:
    op.drop_column("pending_sellers", "network")
    op.drop_column("pending_sellers", "amount")
    op.drop_column("pending_sellers", "pay_to")
