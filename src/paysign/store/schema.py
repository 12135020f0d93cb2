"""Tables, as SQLAlchemy Core: the hot path issues hand-shaped statements, not ORM units.

Times are integer Unix seconds (UTC) in every table: identical on SQLite and PostgreSQL,
compared without time-zone surprises. Money is an integer of USDC base units.
"""

from __future__ import annotations

import sqlalchemy as sa

from paysign.store.schema_base import BigId, metadata

accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("email", sa.String(320), nullable=False, unique=True),
    sa.Column("password_hash", sa.String(200), nullable=False),
    sa.Column("sealed_totp_secret", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    # Set by an operator: the account's credentials are refused; nothing of it is deleted.
    sa.Column("disabled_at", sa.BigInteger, nullable=True),
)

wallets = sa.Table(
    "wallets",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False, unique=True),
    sa.Column("address", sa.String(42), nullable=False, unique=True),
    sa.Column("sealed_key", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("key_hash", sa.LargeBinary(32), nullable=False, unique=True),
    sa.Column("display_prefix", sa.String(16), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("revoked_at", sa.BigInteger, nullable=True),
    sa.Column("last_used_at", sa.BigInteger, nullable=True),
)
# "At most one active key per account" is the database's job, so it holds under concurrency and
# across processes. An expired key is retired (revoked_at set) before a new one is inserted.
sa.Index(
    "uq_api_keys_one_unrevoked",
    api_keys.c.account_id,
    unique=True,
    sqlite_where=api_keys.c.revoked_at.is_(None),
    postgresql_where=api_keys.c.revoked_at.is_(None),
)

signatures = sa.Table(
    "signatures",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("api_key_id", sa.ForeignKey("api_keys.id"), nullable=True),
    sa.Column("seller_host", sa.String(255), nullable=False),
    sa.Column("seller_path", sa.String(2048), nullable=False),
    sa.Column("network", sa.String(32), nullable=False),
    sa.Column("asset", sa.String(42), nullable=False),
    sa.Column("pay_to", sa.String(42), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("nonce", sa.LargeBinary(32), nullable=False, unique=True),
    sa.Column("valid_before", sa.BigInteger, nullable=False),
    sa.Column("sandbox", sa.Boolean, nullable=False),
    sa.Column("x402_version", sa.SmallInteger, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="signed"),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("tier", sa.String(16), nullable=True),
    sa.Column("rule", sa.String(2100), nullable=True),
    # The transaction that used the authorization, once the reconciler saw it settled.
    sa.Column("settled_tx", sa.String(66), nullable=True),
    # The spend windows it reserved in beyond the day's and month's (``reserved_windows``):
    # what an expired one gives back. NULL on rows signed before it was kept.
    sa.Column("reserved_in", sa.Text, nullable=True),
)
sa.Index("ix_signatures_account_created", signatures.c.account_id, signatures.c.created_at)

# --- source policy and spend ----------------------------------------------------------------

policies = sa.Table(
    "policies",
    metadata,
    sa.Column("account_id", sa.ForeignKey("accounts.id"), primary_key=True),
    sa.Column("approval", sa.String(16), nullable=False),
    sa.Column("premium", sa.Boolean, nullable=False),
    sa.Column("standard", sa.Boolean, nullable=False),
    sa.Column("open_ecosystem", sa.Boolean, nullable=False),
    sa.Column("cap_per_payment", sa.BigInteger, nullable=True),
    sa.Column("cap_daily", sa.BigInteger, nullable=True),
    sa.Column("cap_monthly", sa.BigInteger, nullable=True),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    # Every payment refused, live and sandbox, until the account holder unfreezes it.
    sa.Column("frozen", sa.Boolean, nullable=False, server_default=sa.false()),
    # The payTo allow and deny lists, as JSON (read with the policy by every signing request).
    sa.Column("payee_rules", sa.Text, nullable=True),
    sa.Column("cap_hourly", sa.BigInteger, nullable=True),
)

policy_rules = sa.Table(
    "policy_rules",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),  # "allow" or "deny"
    sa.Column("host", sa.String(300), nullable=False),
    sa.Column("path", sa.String(2048), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    # An allow rule's own caps (a budget per seller), in base units; NULL for none.
    sa.Column("cap_daily", sa.BigInteger, nullable=True),
    sa.Column("cap_monthly", sa.BigInteger, nullable=True),
    # Host right after the account: the signing path looks rules up by (account, candidate
    # host), and this one index answers that with a probe, not a scan of the account's rules
    # (with kind second, SQLite without statistics scanned all 10,000 of them).
    sa.UniqueConstraint("account_id", "host", "path", "kind"),
)

pending_sellers = sa.Table(
    "pending_sellers",
    metadata,
    sa.Column("account_id", sa.ForeignKey("accounts.id"), primary_key=True),
    sa.Column("host", sa.String(300), primary_key=True),
    sa.Column("path", sa.String(2048), primary_key=True),
    sa.Column("first_seen", sa.BigInteger, nullable=False),
    sa.Column("last_seen", sa.BigInteger, nullable=False),
    sa.Column("refused_count", sa.BigInteger, nullable=False),
    # The terms of the seller's latest refused payment: the holder sees where the money would
    # go before approving. NULL for entries recorded before they were kept.
    sa.Column("pay_to", sa.String(42), nullable=True),
    sa.Column("amount", sa.BigInteger, nullable=True),
    sa.Column("network", sa.String(32), nullable=True),
)

spend_windows = sa.Table(
    "spend_windows",
    metadata,
    sa.Column("account_id", sa.ForeignKey("accounts.id"), primary_key=True),
    # "daily" or "monthly"; "hourly" too for an account with an hourly cap
    sa.Column("window", sa.String(8), primary_key=True),
    sa.Column("start", sa.BigInteger, primary_key=True),
    sa.Column("spent", sa.BigInteger, nullable=False),
)

# What the payments under an allow rule's budget have spent, per window; keyed by the rule's
# host and path (not its row), so the spend survives the policy being saved again.
seller_spend_windows = sa.Table(
    "seller_spend_windows",
    metadata,
    sa.Column("account_id", sa.ForeignKey("accounts.id"), primary_key=True),
    sa.Column("host", sa.String(300), primary_key=True),
    sa.Column("path", sa.String(2048), primary_key=True),
    sa.Column("window", sa.String(8), primary_key=True),  # "daily" or "monthly"
    sa.Column("start", sa.BigInteger, primary_key=True),
    sa.Column("spent", sa.BigInteger, nullable=False),
)

refusals = sa.Table(
    "refusals",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("api_key_id", sa.ForeignKey("api_keys.id"), nullable=True),
    sa.Column("seller_host", sa.String(300), nullable=False),
    sa.Column("seller_path", sa.String(2048), nullable=False),
    sa.Column("network", sa.String(32), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("sandbox", sa.Boolean, nullable=False),
    sa.Column("reason", sa.String(32), nullable=False),  # the problem slug
    sa.Column("rule", sa.String(2100), nullable=True),
    sa.Column("detail", sa.String(4000), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)
sa.Index("ix_refusals_account_created", refusals.c.account_id, refusals.c.created_at)
# Reconciliation scans live signatures still "signed" past their validBefore.
sa.Index("ix_signatures_status_valid_before", signatures.c.status, signatures.c.valid_before)

# --- catalog --------------------------------------------------------------------------------

listings = sa.Table(
    "listings",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("tier", sa.String(16), nullable=False),
    sa.Column("url", sa.String(2048), nullable=False),
    sa.Column("path", sa.String(2048), nullable=False),
    sa.Column("document", sa.Text, nullable=False),  # the entry as published, JSON
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

# One row: bumped by every catalog change, so every process can tell its snapshot is stale.
catalog_state = sa.Table(
    "catalog_state",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

# --- test funds -----------------------------------------------------------------------------

# One row per account: the last successful grant and the claim in flight. A claim is taken
# with one guarded upsert, so simultaneous requests produce exactly one transfer.
test_funds = sa.Table(
    "test_funds",
    metadata,
    sa.Column("account_id", sa.ForeignKey("accounts.id"), primary_key=True),
    sa.Column("last_granted_at", sa.BigInteger, nullable=True),
    sa.Column("claim_started_at", sa.BigInteger, nullable=True),
)

test_fund_grants = sa.Table(
    "test_fund_grants",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("transaction_hash", sa.String(66), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # "granted" or "pending"
    sa.Column("created_at", sa.BigInteger, nullable=False),
)
sa.Index("ix_test_fund_grants_account", test_fund_grants.c.account_id, test_fund_grants.c.id)

# --- oauth: the authorization server for the connector --------------------------------------

# Clients registered with RFC 7591 dynamic registration; ``metadata`` is the registered
# client information as JSON, the client secret replaced by its SHA-256
# (``client_secret_sha256``). The RFC 7592 registration access token is stored hashed.
oauth_clients = sa.Table(
    "oauth_clients",
    metadata,
    sa.Column("client_id", sa.String(64), primary_key=True),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("registration_token_hash", sa.String(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    # When the client was first granted a code; a client never granted one is deleted a day
    # after it registered (registration is open to anyone).
    sa.Column("granted_at", sa.BigInteger, nullable=True),
)
sa.Index(
    "ix_oauth_clients_ungranted",
    oauth_clients.c.created_at,
    sqlite_where=oauth_clients.c.granted_at.is_(None),
    postgresql_where=oauth_clients.c.granted_at.is_(None),
)

# An authorization request between /authorize and the consent decision. ``id_hash`` is the
# SHA-256 of the random transaction id the sign-in pages carry; ``account_id`` is set once the
# user signed in.
oauth_requests = sa.Table(
    "oauth_requests",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("client_id", sa.String(64), nullable=False),
    sa.Column("params", sa.Text, nullable=False),  # the AuthorizationParams, JSON
    sa.Column("csrf", sa.String(64), nullable=False),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=True),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    # SHA-256 of the random value of the cookie set by the sign-in: only the browser that
    # signed in may decide on the request (the transaction id alone travels in links).
    sa.Column("browser_hash", sa.String(64), nullable=True),
)

# Authorization codes (single use, short-lived) and tokens, all stored as SHA-256 hashes.
oauth_codes = sa.Table(
    "oauth_codes",
    metadata,
    sa.Column("code_hash", sa.String(64), primary_key=True),
    sa.Column("client_id", sa.String(64), nullable=False),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("params", sa.Text, nullable=False),  # redirect_uri, challenge, scopes, resource
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("used_at", sa.BigInteger, nullable=True),
)

# ``kind`` is "access" or "refresh". A ``family`` is every token descending from one
# authorization code: reusing a rotated refresh token revokes the whole family.
oauth_tokens = sa.Table(
    "oauth_tokens",
    metadata,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("family", sa.String(36), nullable=False),
    sa.Column("client_id", sa.String(64), nullable=False),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("scopes", sa.String(2100), nullable=False),
    sa.Column("resource", sa.String(2048), nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("rotated_at", sa.BigInteger, nullable=True),
    sa.Column("revoked_at", sa.BigInteger, nullable=True),
    # Refresh tokens only: the sealed key the pair that replaces this token is derived with
    # (from the token itself), so a retried refresh gets the same pair without storing it.
    sa.Column("successor_key", sa.LargeBinary, nullable=True),
)
sa.Index("ix_oauth_tokens_family", oauth_tokens.c.family)

# The last TOTP time step accepted for each account: a code is usable once (ASVS 6.5.1).
oauth_totp_steps = sa.Table(
    "oauth_totp_steps",
    metadata,
    sa.Column("account_id", sa.ForeignKey("accounts.id"), primary_key=True),
    sa.Column("last_step", sa.BigInteger, nullable=False),
)

# Failed sign-ins per key ("account:<id>" or "address:<ip>") in a fixed window; also the
# client registrations of an address ("register:<address>").
oauth_sign_in_failures = sa.Table(
    "oauth_sign_in_failures",
    metadata,
    sa.Column("key", sa.String(100), primary_key=True),
    sa.Column("window_start", sa.BigInteger, nullable=False),
    sa.Column("failures", sa.Integer, nullable=False),
)

# --- portal: the web portal's sessions ------------------------------------------------------

# A browser session. ``id_hash`` is the SHA-256 of the random id in the cookie; ``account_id``
# is ``None`` before sign-in (the session then only carries the CSRF token of the sign-in and
# sign-up forms). Sign-in replaces the session with a new one (a new id).
portal_sessions = sa.Table(
    "portal_sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=True),
    sa.Column("csrf", sa.String(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("last_seen_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),  # the absolute timeout
)
sa.Index("ix_portal_sessions_account_id", portal_sessions.c.account_id)
sa.Index("ix_portal_sessions_expires_at", portal_sessions.c.expires_at)

# --- background jobs ------------------------------------------------------------------------

# The process (``holder``) that runs a periodic job (``name``) until ``expires_at`` (Unix
# seconds); it renews the lease while it lives, and anyone may take an expired one.
job_leases = sa.Table(
    "job_leases",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(128), nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
)

# What leaves the service for the holder (notifications, withdrawals): declared on the same
# metadata in a module of its own, re-exported here so every table is named from one place.
from paysign.store.schema_outbound import (  # noqa: E402
    notification_deliveries,
    notification_outbox,
    notification_targets,
    withdrawals,
)

__all__ = [
    "BigId",
    "accounts",
    "api_keys",
    "catalog_state",
    "job_leases",
    "listings",
    "metadata",
    "notification_deliveries",
    "notification_outbox",
    "notification_targets",
    "oauth_clients",
    "oauth_codes",
    "oauth_requests",
    "oauth_sign_in_failures",
    "oauth_tokens",
    "oauth_totp_steps",
    "pending_sellers",
    "policies",
    "policy_rules",
    "portal_sessions",
    "refusals",
    "seller_spend_windows",
    "signatures",
    "spend_windows",
    "test_fund_grants",
    "test_funds",
    "wallets",
    "withdrawals",
]
