"""Web portal: browser sessions.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "portal_sessions",
        sa.Column("id_hash", sa.String(64), nullable=False),
        sa.Column("account_id", sa.String(36), nullable=True),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("last_seen_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id_hash", name="pk_portal_sessions"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_portal_sessions_account_id_accounts"
        ),
    )
    op.create_index("ix_portal_sessions_account_id", "portal_sessions", ["account_id"])
    op.create_index("ix_portal_sessions_expires_at", "portal_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_portal_sessions_expires_at", table_name="portal_sessions")
    op.drop_index("ix_portal_sessions_account_id", table_name="portal_sessions")
    op.drop_table("portal_sessions")
