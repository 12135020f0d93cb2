"""Notifications: the holder's webhooks and email addresses, an outbox of events written with
the refusal that caused them, and the deliveries of those events.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "notification_targets",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("sealed_secret", sa.LargeBinary, nullable=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_notification_targets"),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name="fk_notification_targets_account_id_accounts",
        ),
    )
    op.create_index("ix_notification_targets_account_id", "notification_targets", ["account_id"])
    op.create_table(
        "notification_outbox",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("seller_host", sa.String(300), nullable=False),
        sa.Column("seller_path", sa.String(2048), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("detail", sa.String(4000), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("fanned_out", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.PrimaryKeyConstraint("id", name="pk_notification_outbox"),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name="fk_notification_outbox_account_id_accounts",
        ),
    )
    op.create_index(
        "ix_notification_outbox_account_event",
        "notification_outbox",
        ["account_id", "event", "created_at"],
    )
    op.create_index("ix_notification_outbox_fanned_out", "notification_outbox", ["fanned_out"])
    op.create_table(
        "notification_deliveries",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("outbox_id", BigId, nullable=False),
        sa.Column("target_id", sa.String(36), nullable=False),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_error", sa.String(500), nullable=True),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("delivered_at", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_notification_deliveries"),
        sa.ForeignKeyConstraint(
            ["outbox_id"],
            ["notification_outbox.id"],
            name="fk_notification_deliveries_outbox_id_notification_outbox",
        ),
        sa.ForeignKeyConstraint(
            ["target_id"],
            ["notification_targets.id"],
            name="fk_notification_deliveries_target_id_notification_targets",
        ),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name="fk_notification_deliveries_account_id_accounts",
        ),
    )
    op.create_index(
        "ix_notification_deliveries_account_id", "notification_deliveries", ["account_id"]
    )
    op.create_index(
        "ix_notification_deliveries_status_next",
        "notification_deliveries",
        ["status", "next_attempt_at"],
    )


def downgrade() -> None:
    op.drop_table("notification_deliveries")
    op.drop_table("notification_outbox")
    op.drop_table("notification_targets")
