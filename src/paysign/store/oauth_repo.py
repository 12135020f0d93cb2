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
    oauth_clients,
    oauth_codes,
    oauth_requests,
    oauth_sign_in_failures,
    oauth_tokens,
    oauth_totp_steps,
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
        )
    )


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
        ).where(c.token_hash == token_hash)
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


# ---- sign-in: TOTP steps and failure counts ----


def accept_totp_step(conn: Connection, account_id: str, step: int) -> bool:
    """Record ``step`` as the account's last accepted TOTP step unless it (or a later one)
    was accepted before: a code is usable once."""
    row = oauth_totp_steps.c
    statement = (
        _insert(conn, oauth_totp_steps)
        .values(account_id=account_id, last_step=step)
        .on_conflict_do_update(
            index_elements=[row.account_id],
            set_={"last_step": step},
            where=row.last_step < step,
        )
        .returning(row.account_id)
    )
    return conn.execute(statement).first() is not None


def has_accepted_code(conn: Connection, account_id: str) -> bool:
    """Whether any authenticator code of the account was ever accepted (it is enrolled)."""
    row = oauth_totp_steps.c
    found = conn.execute(sa.select(row.last_step).where(row.account_id == account_id)).first()
    return found is not None


def failures(conn: Connection, key: str, now: int, window: int) -> int:
    c = oauth_sign_in_failures.c
    found = conn.execute(
        sa.select(c.failures).where(c.key == key, c.window_start > now - window)
    ).scalar_one_or_none()
    return int(found or 0)


def count_event(conn: Connection, key: str, now: int, window: int) -> tuple[int, int]:
    """Count one event of the key in its fixed window, atomically; returns the count so far
    in the window, this one included, and when the window started. Concurrent callers each
    see a different count, so a limit checked on it holds exactly across processes."""
    row = oauth_sign_in_failures.c
    expired = row.window_start <= now - window
    statement = (
        _insert(conn, oauth_sign_in_failures)
        .values(key=key, window_start=now, failures=1)
        .on_conflict_do_update(
            index_elements=[row.key],
            set_={
                "window_start": sa.case((expired, now), else_=row.window_start),
                "failures": sa.case((expired, 1), else_=row.failures + 1),
            },
        )
        .returning(row.failures, row.window_start)
    )
    count, start = conn.execute(statement).one()
    return int(count), int(start)


def purge_counts(conn: Connection, prefix: str, ended_before: int) -> None:
    """Delete the counters of keys starting with ``prefix`` whose window started before."""
    c = oauth_sign_in_failures.c
    conn.execute(
        oauth_sign_in_failures.delete().where(
            c.key.startswith(prefix, autoescape=True), c.window_start < ended_before
        )
    )


def record_failure(conn: Connection, key: str, now: int, window: int) -> None:
    """Count one failure in the key's window (a new window once the old one is over)."""
    count_event(conn, key, now, window)


def clear_failures(conn: Connection, key: str) -> None:
    conn.execute(oauth_sign_in_failures.delete().where(oauth_sign_in_failures.c.key == key))


# ---- the account holder's view: connected assistants ----


def connected_assistants(conn: Connection, account_id: str, now: int) -> int:
    """How many grants (token families) of the account can still get an access token: a live
    refresh token, unrotated and unrevoked."""
    c = oauth_tokens.c
    statement = sa.select(sa.func.count(sa.distinct(c.family))).where(
        c.account_id == account_id,
        c.kind == "refresh",
        c.rotated_at.is_(None),
        c.revoked_at.is_(None),
        c.expires_at > now,
    )
    return int(conn.execute(statement).scalar_one())


def revoke_account_tokens(conn: Connection, account_id: str, now: int) -> int:
    """Revoke every token of the account (after a password change or authenticator reset, or
    on request); returns how many live grants that disconnected."""
    live = connected_assistants(conn, account_id, now)
    c = oauth_tokens.c
    conn.execute(
        oauth_tokens.update()
        .where(c.account_id == account_id, c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return live
