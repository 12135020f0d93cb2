"""Refresh tokens carry the sealed key their successor pair is derived with, so a client that
retries a refresh within the grace gets the same pair again.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("oauth_tokens", sa.Column("successor_key", sa.LargeBinary, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("oauth_tokens") as batch:
        batch.drop_column("successor_key")
