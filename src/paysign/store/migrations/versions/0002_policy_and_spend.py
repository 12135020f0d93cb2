"""Source policy, pending sellers, spend windows, refusals; tier and rule on signatures.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "policies",
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("approval", sa.String(16), nullable=False),
        sa.Column("premium", sa.Boolean, nullable=False),
        sa.Column("standard", sa.Boolean, nullable=False),
        sa.Column("open_ecosystem", sa.Boolean, nullable=False),
        sa.Column("cap_per_payment", sa.BigInteger, nullable=True),
        sa.Column("cap_daily", sa.BigInteger, nullable=True),
        sa.Column("cap_monthly", sa.BigInteger, nullable=True),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("account_id", name="pk_policies"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_policies_account_id_accounts"
        ),
    )
    op.create_table(
        "policy_rules",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("host", sa.String(300), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_policy_rules"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_policy_rules_account_id_accounts"
        ),
        sa.UniqueConstraint(
            "account_id", "host", "path", "kind", name="uq_policy_rules_account_id_host_path_kind"
        ),
    )
    op.create_table(
        "pending_sellers",
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("host", sa.String(300), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("first_seen", sa.BigInteger, nullable=False),
        sa.Column("last_seen", sa.BigInteger, nullable=False),
        sa.Column("refused_count", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("account_id", "host", "path", name="pk_pending_sellers"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_pending_sellers_account_id_accounts"
        ),
    )
    op.create_table(
        "spend_windows",
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("window", sa.String(8), nullable=False),
        sa.Column("start", sa.BigInteger, nullable=False),
        sa.Column("spent", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("account_id", "window", "start", name="pk_spend_windows"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_spend_windows_account_id_accounts"
        ),
    )
    op.create_table(
        "refusals",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("account_id", sa.String(36), nullable=False),
        sa.Column("api_key_id", sa.String(36), nullable=True),
        sa.Column("seller_host", sa.String(300), nullable=False),
        sa.Column("seller_path", sa.String(2048), nullable=False),
        sa.Column("network", sa.String(32), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("sandbox", sa.Boolean, nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("rule", sa.String(2100), nullable=True),
        sa.Column("detail", sa.String(4000), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_refusals"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name="fk_refusals_account_id_accounts"
        ),
        sa.ForeignKeyConstraint(
            ["api_key_id"], ["api_keys.id"], name="fk_refusals_api_key_id_api_keys"
        ),
    )
    op.create_index("ix_refusals_account_created", "refusals", ["account_id", "created_at"])
    with op.batch_alter_table("signatures") as batch:
        batch.add_column(sa.Column("tier", sa.String(16), nullable=True))
        batch.add_column(sa.Column("rule", sa.String(2100), nullable=True))
    op.create_index("ix_signatures_status_valid_before", "signatures", ["status", "valid_before"])


def downgrade() -> None:
    op.drop_index("ix_signatures_status_valid_before", table_name="signatures")
    with op.batch_alter_table("signatures") as batch:
        batch.drop_column("rule")
        batch.drop_column("tier")
    op.drop_index("ix_refusals_account_created", table_name="refusals")
    op.drop_table("refusals")
    op.drop_table("spend_windows")
    op.drop_table("pending_sellers")
    op.drop_table("policy_rules")
    op.drop_table("policies")
