"""A signature keeps which spend windows it reserved in beyond the day's and month's (the
hour's, budgeted allow rules'), so an expired one gives back exactly there; NULL on older rows.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("signatures", sa.Column("reserved_in", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("signatures") as batch:
        batch.drop_column("reserved_in")
