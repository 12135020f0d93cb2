"""A settled signature keeps the transaction that used its authorization (the hash of the
USDC ``AuthorizationUsed`` event's transaction), so the holder can follow it to the chain.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("signatures", sa.Column("settled_tx", sa.String(66), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("signatures") as batch:
        batch.drop_column("settled_tx")
