"""Tables of what leaves the service for the holder: notifications (targets, the outbox a
refusal writes in its own transaction, deliveries) and withdrawals. Same metadata as
``schema.py``, which re-exports them."""

from __future__ import annotations

import sqlalchemy as sa

from paysign.store.schema_base import BigId, metadata

# --- notifications --------------------------------------------------------------------------

# Where an account's holder is told about refusals they must act on: a webhook (``url`` and its
# signing secret, sealed by the vault) or an email address (``url`` is then ``mailto:...``).
notification_targets = sa.Table(
    "notification_targets",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),  # "webhook" or "email"
    sa.Column("url", sa.String(2048), nullable=False),
    sa.Column("sealed_secret", sa.LargeBinary, nullable=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

# An event to tell the holder about, written in the transaction that caused it (a refusal's),
# so a rolled-back request sends nothing and a committed one is never forgotten. ``fanned_out``:
# a delivery per target exists for it.
notification_outbox = sa.Table(
    "notification_outbox",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("event", sa.String(32), nullable=False),  # the problem slug, or "test"
    sa.Column("seller_host", sa.String(300), nullable=False),
    sa.Column("seller_path", sa.String(2048), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("detail", sa.String(4000), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("fanned_out", sa.Boolean, nullable=False, server_default=sa.false()),
)
sa.Index(
    "ix_notification_outbox_account_event",
    notification_outbox.c.account_id,
    notification_outbox.c.event,
    notification_outbox.c.created_at,
)
sa.Index("ix_notification_outbox_fanned_out", notification_outbox.c.fanned_out)

# One event sent to one target: what the holder sees on the notifications page.
notification_deliveries = sa.Table(
    "notification_deliveries",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),  # the webhook-id ("msg_...")
    sa.Column("outbox_id", sa.ForeignKey("notification_outbox.id"), nullable=False),
    sa.Column("target_id", sa.ForeignKey("notification_targets.id"), nullable=False),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # "pending", "delivered", "failed"
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("last_error", sa.String(500), nullable=True),
    sa.Column("next_attempt_at", sa.BigInteger, nullable=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("delivered_at", sa.BigInteger, nullable=True),
)
# The account's deliveries newest first: the notifications page and the activity read them so.
sa.Index(
    "ix_notification_deliveries_account_created",
    notification_deliveries.c.account_id,
    notification_deliveries.c.created_at,
)
sa.Index(
    "ix_notification_deliveries_status_next",
    notification_deliveries.c.status,
    notification_deliveries.c.next_attempt_at,
)

# --- withdrawals ----------------------------------------------------------------------------

# USDC the holder sent out of the custodial wallet: recorded before the transfer is submitted
# (``submitting``), then ``sent`` with its transaction, or ``failed`` (nothing moved) or
# ``pending`` (submitted, its fate unknown), until the reconciler reads its fate from the chain.
# ``fresh_code``: an authenticator code was spent. ``valid_before``: the authorization's, in chain
# time (NULL on rows older than the column).
withdrawals = sa.Table(
    "withdrawals",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("network", sa.String(32), nullable=False),
    sa.Column("sandbox", sa.Boolean, nullable=False),
    sa.Column("from_address", sa.String(42), nullable=False),
    sa.Column("to_address", sa.String(42), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("nonce", sa.LargeBinary(32), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("transaction_hash", sa.String(66), nullable=True),
    sa.Column("fresh_code", sa.Boolean, nullable=False),
    sa.Column("valid_before", sa.BigInteger, nullable=True),
    # When the fresh code was verified (NULL on rows older than the column).
    sa.Column("code_verified_at", sa.BigInteger, nullable=True),
)
sa.Index("ix_withdrawals_account", withdrawals.c.account_id, withdrawals.c.created_at)
sa.Index("ix_withdrawals_status", withdrawals.c.status, withdrawals.c.network, withdrawals.c.id)
