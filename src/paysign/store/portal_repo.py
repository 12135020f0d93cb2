"""Storage for the web portal: sessions (stored as the SHA-256 of their id) and the reads its
pages need. Callers (the use cases) own the transaction."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store.policy_repo import load_settings
from paysign.store.repositories import AccountRecord, KeyHolder
from paysign.store.schema import accounts, api_keys, portal_sessions, wallets


def find_account(conn: Connection, account_id: str) -> AccountRecord | None:
    c = accounts.c
    row = conn.execute(
        sa.select(c.id, c.email, c.password_hash, c.sealed_totp_secret, c.created_at).where(
            c.id == account_id
        )
    ).first()
    return None if row is None else AccountRecord(*row)


def set_password_hash(conn: Connection, account_id: str, password_hash: str) -> None:
    conn.execute(
        accounts.update().where(accounts.c.id == account_id).values(password_hash=password_hash)
    )


def set_sealed_totp_secret(conn: Connection, account_id: str, sealed: bytes) -> None:
    conn.execute(
        accounts.update().where(accounts.c.id == account_id).values(sealed_totp_secret=sealed)
    )


# ---- sessions ----


@dataclass(frozen=True, slots=True)
class SessionRow:
    account_id: str | None
    csrf: str
    created_at: int
    last_seen_at: int
    expires_at: int


def insert_session(
    conn: Connection,
    id_hash: str,
    *,
    account_id: str | None,
    csrf: str,
    now: int,
    expires_at: int,
) -> None:
    conn.execute(
        portal_sessions.insert().values(
            id_hash=id_hash,
            account_id=account_id,
            csrf=csrf,
            created_at=now,
            last_seen_at=now,
            expires_at=expires_at,
        )
    )


def find_session(conn: Connection, id_hash: str) -> SessionRow | None:
    c = portal_sessions.c
    row = conn.execute(
        sa.select(c.account_id, c.csrf, c.created_at, c.last_seen_at, c.expires_at).where(
            c.id_hash == id_hash
        )
    ).first()
    return None if row is None else SessionRow(*row)


def touch_session(conn: Connection, id_hash: str, now: int) -> None:
    c = portal_sessions.c
    conn.execute(portal_sessions.update().where(c.id_hash == id_hash).values(last_seen_at=now))


def delete_session(conn: Connection, id_hash: str) -> None:
    conn.execute(portal_sessions.delete().where(portal_sessions.c.id_hash == id_hash))


def delete_account_sessions(conn: Connection, account_id: str, *, keep: str | None = None) -> int:
    c = portal_sessions.c
    statement = portal_sessions.delete().where(c.account_id == account_id)
    if keep is not None:
        statement = statement.where(c.id_hash != keep)
    return conn.execute(statement).rowcount


def purge_sessions(conn: Connection, now: int, idle_before: int) -> None:
    """Drop sessions past their absolute timeout or idle since ``idle_before``."""
    c = portal_sessions.c
    conn.execute(
        portal_sessions.delete().where(sa.or_(c.expires_at <= now, c.last_seen_at < idle_before))
    )


# ---- what the pages show ----


@dataclass(frozen=True, slots=True)
class KeyRow:
    display_prefix: str
    created_at: int
    expires_at: int
    revoked_at: int | None
    last_used_at: int | None


def keys_of(conn: Connection, account_id: str, limit: int = 10) -> list[KeyRow]:
    """The account's keys, newest first."""
    c = api_keys.c
    rows = conn.execute(
        sa.select(c.display_prefix, c.created_at, c.expires_at, c.revoked_at, c.last_used_at)
        .where(c.account_id == account_id)
        .order_by(c.created_at.desc(), c.id)
        .limit(limit)
    ).all()
    return [KeyRow(*row) for row in rows]


def wallet_address(conn: Connection, account_id: str) -> str | None:
    found = conn.execute(
        sa.select(wallets.c.address).where(wallets.c.account_id == account_id)
    ).scalar_one_or_none()
    return None if found is None else str(found)


def wallet_holder(conn: Connection, account_id: str) -> KeyHolder | None:
    """The signed-in account as the wallet services (the faucet) take it: no API key."""
    c = wallets.c
    row = conn.execute(
        sa.select(c.id, c.address, c.sealed_key).where(c.account_id == account_id)
    ).first()
    if row is None:
        return None
    return KeyHolder(
        key_id=None,
        account_id=account_id,
        wallet_id=row.id,
        wallet_address=row.address,
        sealed_wallet_key=bytes(row.sealed_key),
        last_used_at=None,
        policy=load_settings(conn, account_id),
    )
