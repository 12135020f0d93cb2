"""Storage for the OAuth authorization server: every guard is one statement, so it holds
across processes sharing one database (a code is exchanged once, a refresh token rotated once,
a TOTP step accepted once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from paysign.store.schema import (
    accounts,
    oauth_clients,
    oauth_codes,
    oauth_requests,
    oauth_tokens,
)


def _insert(conn: Connection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


# ---- clients ----


@dataclass(frozen=True, slots=True)
class ClientRow:
    client_id: str
    metadata: str
    registration_token_hash: str


def insert_client(
    conn: Connection, client_id: str, metadata: str, registration_token_hash: str, now: int
) -> None:
    conn.execute(
        oauth_clients.insert().values(
            client_id=client_id,
            metadata=metadata,
            registration_token_hash=registration_token_hash,
            created_at=now,
        )
    )


def find_client(conn: Connection, client_id: str) -> ClientRow | None:
    c = oauth_clients.c
    row = conn.execute(
        sa.select(c.client_id, c.metadata, c.registration_token_hash).where(
            c.client_id == client_id
        )
    ).first()
    return None if row is None else ClientRow(*row)


def update_client_metadata(conn: Connection, client_id: str, metadata: str) -> None:
    c = oauth_clients.c
    conn.execute(oauth_clients.update().where(c.client_id == client_id).values(metadata=metadata))


def client_was_granted(conn: Connection, client_id: str) -> bool:
    """Whether a holder has ever granted the client a code."""
    c = oauth_clients.c
    statement = sa.select(c.granted_at).where(c.client_id == client_id)
    return conn.execute(statement).scalar() is not None


def mark_client_granted(conn: Connection, client_id: str, now: int) -> bool:
    """Record the client's first grant; ``False`` if the client is gone (it expired)."""
    c = oauth_clients.c
    result = conn.execute(
        oauth_clients.update()
        .where(c.client_id == client_id)
        .values(granted_at=sa.func.coalesce(c.granted_at, now))
    )
    return result.rowcount == 1


def purge_ungranted_clients(conn: Connection, registered_before: int) -> None:
    """Delete the clients registered before then that were never granted a code."""
    c = oauth_clients.c
    conn.execute(
        oauth_clients.delete().where(c.granted_at.is_(None), c.created_at < registered_before)
    )


# ---- pending authorization requests ----


@dataclass(frozen=True, slots=True)
class RequestRow:
    client_id: str
    params: str
    csrf: str
    account_id: str | None
    expires_at: int
    browser_hash: str | None


def insert_request(
    conn: Connection, id_hash: str, client_id: str, params: str, csrf: str, expires_at: int
) -> None:
    conn.execute(
        oauth_requests.insert().values(
            id_hash=id_hash, client_id=client_id, params=params, csrf=csrf, expires_at=expires_at
        )
    )


def _request_columns() -> tuple[sa.Column[Any], ...]:
    c = oauth_requests.c
    return (c.client_id, c.params, c.csrf, c.account_id, c.expires_at, c.browser_hash)


def find_request(conn: Connection, id_hash: str, now: int) -> RequestRow | None:
    c = oauth_requests.c
    row = conn.execute(
        sa.select(*_request_columns()).where(c.id_hash == id_hash, c.expires_at > now)
    ).first()
    return None if row is None else RequestRow(*row)


def sign_in_request(
    conn: Connection,
    id_hash: str,
    form_csrf: str,
    account_id: str,
    csrf: str,
    browser_hash: str,
    now: int,
) -> bool:
    """Record who signed in and in which browser, with a fresh CSRF token for the consent
    form. Only once, and only for the sign-in form's own token: ``False`` otherwise."""
    c = oauth_requests.c
    result = conn.execute(
        oauth_requests.update()
        .where(
            c.id_hash == id_hash,
            c.csrf == form_csrf,
            c.account_id.is_(None),
            c.expires_at > now,
        )
        .values(account_id=account_id, csrf=csrf, browser_hash=browser_hash)
    )
    return result.rowcount == 1


def take_request(conn: Connection, id_hash: str, seen: RequestRow, now: int) -> RequestRow | None:
    """Consume a signed-in request (once) as it was ``seen`` and checked: the consent
    decision. ``None`` if it changed, expired or was taken meanwhile."""
    c = oauth_requests.c
    row = conn.execute(
        oauth_requests.delete()
        .where(
            c.id_hash == id_hash,
            c.csrf == seen.csrf,
            c.account_id == seen.account_id,
            c.browser_hash == seen.browser_hash,
            c.expires_at > now,
        )
        .returning(*_request_columns())
    ).first()
    return None if row is None else RequestRow(*row)


def purge_expired(conn: Connection, now: int) -> None:
    conn.execute(oauth_requests.delete().where(oauth_requests.c.expires_at <= now))


# ---- authorization codes ----


@dataclass(frozen=True, slots=True)
class CodeRow:
    client_id: str
    account_id: str
    params: str
    expires_at: int
    used_at: int | None


def insert_code(
    conn: Connection, code_hash: str, client_id: str, account_id: str, params: str, expires_at: int
) -> None:
    conn.execute(
        oauth_codes.insert().values(
            code_hash=code_hash,
            client_id=client_id,
            account_id=account_id,
            params=params,
            expires_at=expires_at,
        )
    )


def find_code(conn: Connection, code_hash: str) -> CodeRow | None:
    c = oauth_codes.c
    row = conn.execute(
        sa.select(c.client_id, c.account_id, c.params, c.expires_at, c.used_at).where(
            c.code_hash == code_hash
        )
    ).first()
    return None if row is None else CodeRow(*row)


def use_code(conn: Connection, code_hash: str, now: int) -> bool:
    """Mark the code used; ``False`` if it already was (or expired)."""
    c = oauth_codes.c
    result = conn.execute(
        oauth_codes.update()
        .where(c.code_hash == code_hash, c.used_at.is_(None), c.expires_at > now)
        .values(used_at=now)
    )
    return result.rowcount == 1


# ---- tokens ----


@dataclass(frozen=True, slots=True)
class TokenRow:
    kind: str
    family: str
    client_id: str
    account_id: str
    scopes: str
    resource: str
    expires_at: int
    rotated_at: int | None
    revoked_at: int | None


def insert_token(
    conn: Connection,
    token_hash: str,
    *,
    kind: str,
    family: str,
    client_id: str,
    account_id: str,
    scopes: str,
    resource: str,
    expires_at: int,
    successor_key: bytes | None = None,
) -> None:
    conn.execute(
        oauth_tokens.insert().values(
            token_hash=token_hash,
            kind=kind,
            family=family,
            client_id=client_id,
            account_id=account_id,
            scopes=scopes,
            resource=resource,
            expires_at=expires_at,
            successor_key=successor_key,
        )
    )


def successor_key(conn: Connection, token_hash: str) -> bytes | None:
    """The sealed key a refresh token's successor pair is derived with (``None``: none kept)."""
    c = oauth_tokens.c
    found = conn.execute(sa.select(c.successor_key).where(c.token_hash == token_hash)).first()
    return None if found is None or found[0] is None else bytes(found[0])


def find_token(conn: Connection, token_hash: str) -> TokenRow | None:
    c = oauth_tokens.c
    row = conn.execute(
        sa.select(
            c.kind,
            c.family,
            c.client_id,
            c.account_id,
            c.scopes,
            c.resource,
            c.expires_at,
            c.rotated_at,
            c.revoked_at,
        )
        # A disabled account's tokens are not found: refused like unknown ones, kept as they are.
        .join(accounts, accounts.c.id == c.account_id)
        .where(c.token_hash == token_hash, accounts.c.disabled_at.is_(None))
    ).first()
    return None if row is None else TokenRow(*row)


def rotate_token(conn: Connection, token_hash: str, now: int) -> bool:
    """Retire a live refresh token; ``False`` if it was already rotated or revoked."""
    c = oauth_tokens.c
    result = conn.execute(
        oauth_tokens.update()
        .where(c.token_hash == token_hash, c.rotated_at.is_(None), c.revoked_at.is_(None))
        .values(rotated_at=now)
    )
    return result.rowcount == 1


def revoke_family(conn: Connection, family: str, now: int) -> None:
    c = oauth_tokens.c
    conn.execute(
        oauth_tokens.update()
        .where(c.family == family, c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
