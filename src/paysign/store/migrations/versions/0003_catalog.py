"""The catalog: listings and a version stamp.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "listings",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_listings"),
        sa.UniqueConstraint("name", name="uq_listings_name"),
    )
    op.create_table(
        "catalog_state",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_catalog_state"),
    )


def downgrade() -> None:
    op.drop_table("catalog_state")
    op.drop_table("listings")
