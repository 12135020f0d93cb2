"""An account's OAuth grants as its holder sees and ends them: the assistants connected, and
their revocation (all of them after a credential changes, or one client on the holder's word),
each together with the grants still on their way, which would connect them again right after."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.store.schema import oauth_clients, oauth_codes, oauth_requests, oauth_tokens


def connected_assistants(conn: Connection, account_id: str, now: int) -> int:
    """How many grants (token families) of the account can still get an access token: a live
    refresh token, unrotated and unrevoked."""
    return _live_grants(conn, account_id, now)


def revoke_account_tokens(conn: Connection, account_id: str, now: int) -> int:
    """Revoke every token of the account (after a password change or authenticator reset, or
    on request), and every grant still on its way: a sign-in waiting for consent and a code
    not yet exchanged, made with the credential being replaced. Returns how many live grants
    that disconnected."""
    return _revoke(conn, account_id, now)


def revoke_client_tokens(conn: Connection, account_id: str, client_id: str, now: int) -> int:
    """Revoke every token one client holds for the account (none of another account's, none of
    another client's), and its grants still on their way (a signed-in sign-in waiting for
    consent, a code not yet exchanged), which would connect it again right after; returns how
    many live grants that disconnected."""
    return _revoke(conn, account_id, now, client_id)


def _live_grants(conn: Connection, account_id: str, now: int, client_id: str = "") -> int:
    """The account's live grants (of the client ``client_id`` only, when given)."""
    c = oauth_tokens.c
    of_client = [c.client_id == client_id] if client_id else []
    statement = sa.select(sa.func.count(sa.distinct(c.family))).where(
        *_live_refresh_tokens(account_id, now), *of_client
    )
    return int(conn.execute(statement).scalar_one())


def _revoke(conn: Connection, account_id: str, now: int, client_id: str = "") -> int:
    """Revoke the account's tokens and drop its grants on their way (of the client
    ``client_id`` only, when given); returns how many live grants that disconnected."""
    live = _live_grants(conn, account_id, now, client_id)
    c = oauth_tokens.c
    of_client = [c.client_id == client_id] if client_id else []
    conn.execute(
        oauth_tokens.update()
        .where(c.account_id == account_id, c.revoked_at.is_(None), *of_client)
        .values(revoked_at=now)
    )
    _drop_grants_on_their_way(conn, account_id, client_id)
    return live


def _drop_grants_on_their_way(conn: Connection, account_id: str, client_id: str = "") -> None:
    """Delete the account's sign-ins waiting for consent and its codes not yet exchanged (of
    the client ``client_id`` only, when given): each would mint a grant after a revocation."""
    requests, codes = oauth_requests.c, oauth_codes.c
    of_requests = [requests.account_id == account_id]
    of_codes = [codes.account_id == account_id, codes.used_at.is_(None)]
    if client_id:
        of_requests.append(requests.client_id == client_id)
        of_codes.append(codes.client_id == client_id)
    conn.execute(oauth_requests.delete().where(*of_requests))
    conn.execute(oauth_codes.delete().where(*of_codes))


@dataclass(frozen=True, slots=True)
class ConnectedClient:
    """An OAuth client holding at least one live grant of an account."""

    client_id: str
    #: The client's registered metadata (JSON, as the client sent it: untrusted text).
    metadata: str
    #: How many live grants (sign-ins) of the account it holds, and when the last one ends.
    grants: int
    expires_at: int


def _live_refresh_tokens(account_id: str, now: int) -> tuple[sa.ColumnElement[bool], ...]:
    """The account's tokens that can still get an access token."""
    c = oauth_tokens.c
    return (
        c.account_id == account_id,
        c.kind == "refresh",
        c.rotated_at.is_(None),
        c.revoked_at.is_(None),
        c.expires_at > now,
    )


def connected_clients(conn: Connection, account_id: str, now: int) -> list[ConnectedClient]:
    """The clients of ``connected_assistants``, each with its grants; latest expiry first."""
    c = oauth_tokens.c
    live = (
        sa.select(
            c.client_id,
            sa.func.count(sa.distinct(c.family)).label("grants"),
            sa.func.max(c.expires_at).label("expires_at"),
        )
        .where(*_live_refresh_tokens(account_id, now))
        .group_by(c.client_id)
        .subquery()
    )
    rows = conn.execute(
        sa.select(live.c.client_id, oauth_clients.c.metadata, live.c.grants, live.c.expires_at)
        .join(oauth_clients, oauth_clients.c.client_id == live.c.client_id)
        .order_by(live.c.expires_at.desc(), live.c.client_id)
    ).all()
    return [ConnectedClient(r[0], r[1], int(r[2]), int(r[3])) for r in rows]
