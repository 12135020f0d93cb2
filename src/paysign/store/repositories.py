"""Statements over one open transaction. Callers (the use cases) own the transaction."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.errors import AccountAlreadyExists, ActiveKeyExists
from paysign.policy.decide import PolicySettings
from paysign.store.schema import accounts, api_keys, signatures, wallets


@dataclass(frozen=True, slots=True)
class AccountRecord:
    id: str
    email: str
    password_hash: str
    sealed_totp_secret: bytes
    created_at: int
    disabled_at: int | None = None


@dataclass(frozen=True, slots=True)
class KeyHolder:
    """What an authenticated credential may act for: its account and that account's wallet.

    ``key_id`` is the API key's id, or ``None`` when the account signed in another way (OAuth).
    """

    key_id: str | None
    account_id: str
    wallet_id: str
    wallet_address: str
    sealed_wallet_key: bytes
    last_used_at: int | None
    policy: PolicySettings


@dataclass(slots=True)  # not frozen: one is built per signature, and frozen init is 4x slower
class SignatureRecord:
    account_id: str
    api_key_id: str | None
    seller_host: str
    seller_path: str
    network: str
    asset: str
    pay_to: str
    amount: int
    nonce: bytes
    valid_before: int
    sandbox: bool
    x402_version: int
    created_at: int
    tier: str | None = None
    rule: str | None = None
    status: str = "signed"
    settled_tx: str | None = None  # set by the reconciler, never at signing
    #: The spend windows it reserved in beyond the day's and month's (``reserved_windows``).
    reserved_in: str | None = None


#: The columns a ``SignatureRecord`` fills, in the table's order: all but the generated id. The
#: signing path's INSERT and COPY, and the row of values it sends, are built from these.
SIGNATURE_COLUMNS: tuple[str, ...] = tuple(
    column.name for column in signatures.columns if not column.primary_key
)


def insert_account(conn: Connection, account: AccountRecord) -> None:
    try:
        with conn.begin_nested():
            conn.execute(
                accounts.insert().values(
                    id=account.id,
                    email=account.email,
                    password_hash=account.password_hash,
                    sealed_totp_secret=account.sealed_totp_secret,
                    created_at=account.created_at,
                )
            )
    except sa.exc.IntegrityError:
        raise AccountAlreadyExists(f"an account for {account.email} already exists") from None


def find_account_by_email(conn: Connection, email: str) -> AccountRecord | None:
    row = conn.execute(sa.select(accounts).where(accounts.c.email == email)).first()
    if row is None:
        return None
    return AccountRecord(
        id=row.id,
        email=row.email,
        password_hash=row.password_hash,
        sealed_totp_secret=row.sealed_totp_secret,
        created_at=row.created_at,
        disabled_at=row.disabled_at,
    )


@dataclass(frozen=True, slots=True)
class AccountSummary:
    """What an operator sees of an account: never a secret."""

    id: str
    email: str
    wallet_address: str
    created_at: int
    disabled_at: int | None
    active_key_expires_at: int | None


def list_accounts(conn: Connection, now: int) -> list[AccountSummary]:
    live_key = (
        sa.select(sa.func.max(api_keys.c.expires_at))
        .where(
            api_keys.c.account_id == accounts.c.id,
            api_keys.c.revoked_at.is_(None),
            api_keys.c.expires_at > now,
        )
        .scalar_subquery()
    )
    rows = conn.execute(
        sa.select(
            accounts.c.id,
            accounts.c.email,
            wallets.c.address,
            accounts.c.created_at,
            accounts.c.disabled_at,
            live_key,
        )
        .select_from(accounts.join(wallets, wallets.c.account_id == accounts.c.id))
        .order_by(accounts.c.created_at, accounts.c.email)
    ).all()
    return [AccountSummary(*row) for row in rows]


def set_disabled(conn: Connection, account_id: str, disabled_at: int | None) -> bool:
    """Disable (a time) or enable (``None``) the account; ``False`` when it already was so."""
    already = (
        accounts.c.disabled_at.is_(None)
        if disabled_at is None
        else accounts.c.disabled_at.isnot(None)
    )
    result = conn.execute(
        accounts.update()
        .where(accounts.c.id == account_id, sa.not_(already))
        .values(disabled_at=disabled_at)
    )
    return result.rowcount == 1


def insert_wallet(
    conn: Connection, *, wallet_id: str, account_id: str, address: str, sealed_key: bytes, now: int
) -> None:
    conn.execute(
        wallets.insert().values(
            id=wallet_id,
            account_id=account_id,
            address=address,
            sealed_key=sealed_key,
            created_at=now,
        )
    )


def retire_expired_keys(conn: Connection, account_id: str, now: int) -> None:
    """Expired keys stop counting as active: mark them so the one-active index frees up."""
    conn.execute(
        api_keys.update()
        .where(
            api_keys.c.account_id == account_id,
            api_keys.c.revoked_at.is_(None),
            api_keys.c.expires_at <= now,
        )
        .values(revoked_at=api_keys.c.expires_at)
    )


def insert_api_key(
    conn: Connection,
    *,
    key_id: str,
    account_id: str,
    key_hash: bytes,
    display_prefix: str,
    now: int,
    expires_at: int,
) -> None:
    try:
        # A savepoint, so that on PostgreSQL the failed insert does not poison the transaction.
        with conn.begin_nested():
            conn.execute(
                api_keys.insert().values(
                    id=key_id,
                    account_id=account_id,
                    key_hash=key_hash,
                    display_prefix=display_prefix,
                    created_at=now,
                    expires_at=expires_at,
                )
            )
    except sa.exc.IntegrityError:
        raise ActiveKeyExists(
            "this account already has an active API key; revoke it before creating another"
        ) from None


def revoke_active_keys(conn: Connection, account_id: str, now: int) -> int:
    result = conn.execute(
        api_keys.update()
        .where(api_keys.c.account_id == account_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return result.rowcount


def signatures_of(conn: Connection, account_id: str) -> list[SignatureRecord]:
    rows = conn.execute(
        sa.select(*signatures.c[SIGNATURE_COLUMNS])
        .where(signatures.c.account_id == account_id)
        .order_by(signatures.c.id)
    ).all()
    return [SignatureRecord(**row._mapping) for row in rows]
