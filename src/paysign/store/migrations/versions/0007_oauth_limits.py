"""OAuth limits: a pending request is bound to the browser that signed in, and clients
remember when they were first granted a code (those never granted one expire).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("oauth_requests", sa.Column("browser_hash", sa.String(64), nullable=True))
    op.add_column("oauth_clients", sa.Column("granted_at", sa.BigInteger, nullable=True))
    # Clients that already hold a code or a token were granted one: they must not expire.
    op.execute(
        "UPDATE oauth_clients SET granted_at = created_at WHERE client_id IN "
        "(SELECT client_id FROM oauth_codes UNION SELECT client_id FROM oauth_tokens)"
    )
    ungranted = sa.text("granted_at IS NULL")
    op.create_index(
        "ix_oauth_clients_ungranted",
        "oauth_clients",
        ["created_at"],
        sqlite_where=ungranted,
        postgresql_where=ungranted,
    )


def downgrade() -> None:
    op.drop_index("ix_oauth_clients_ungranted", table_name="oauth_clients")
    op.drop_column("oauth_clients", "granted_at")
    op.drop_column("oauth_requests", "browser_hash")
