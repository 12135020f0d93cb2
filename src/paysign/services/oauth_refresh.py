"""Refresh-token rotation that survives a lost answer.

A client that sends a refresh and loses the answer (a timeout, a crash before it saved the new
pair) retries with the token it still has. Rotation has retired that token, and presenting a
retired token is what a thief does, so it revokes the whole grant. Within a short grace after
the rotation, and only while the new pair is untouched (its refresh token not yet used), the
retry gets the same new pair again instead; after the grace, or once the new pair was used, it
revokes the grant as before.

The same pair is given again without storing it: each refresh token's row keeps a random key,
sealed by the vault, and the pair that replaces it is an HMAC of the presented token under that
key. Deriving it takes both the token (only the client has it; we keep its hash) and the key
(only the server can open it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from paysign.custody import KeyVault, SealedSecret
from paysign.custody.vault import SecretUnreadable
from paysign.services.oauth_values import digest
from paysign.store import oauth_repo


def successor_key_context(refresh_hash: str) -> str:
    """What the vault binds a refresh token's successor key to (rotation re-wraps under it)."""
    return f"oauth-refresh:{refresh_hash}"


def new_successor_key(vault: KeyVault, refresh_hash: str) -> bytes:
    """A fresh sealed key for the refresh token with this hash."""
    return vault.seal(successor_key_context(refresh_hash), secrets.token_bytes(32)).to_bytes()


def successor_pair(vault: KeyVault, sealed: bytes | None, token: str) -> tuple[str, str] | None:
    """The (access, refresh) pair that replaces ``token``; ``None`` if it has no readable key
    (issued before keys were kept, or sealed under a master key since dropped)."""
    if sealed is None:
        return None
    try:
        key = vault.open(successor_key_context(digest(token)), SealedSecret.from_bytes(sealed))
    except SecretUnreadable:
        return None

    def derived(kind: bytes) -> str:
        mac = hmac.new(key, kind + b"\0" + token.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    return derived(b"access"), derived(b"refresh")


@dataclass(frozen=True, slots=True)
class RetriedPair:
    access_token: str
    refresh_token: str
    access_expires_in: int


def retried_pair(
    conn: Connection, vault: KeyVault, token: str, now: int, grace: int
) -> RetriedPair | None:
    """The pair ``token`` was already rotated into, if this is a retry within the grace and
    that pair is untouched; ``None`` when presenting ``token`` is a replay."""
    row = oauth_repo.find_token(conn, digest(token))
    if row is None or row.kind != "refresh" or row.revoked_at is not None:
        return None
    if row.rotated_at is None or now - row.rotated_at > grace:
        return None
    pair = successor_pair(vault, oauth_repo.successor_key(conn, digest(token)), token)
    if pair is None:
        return None
    access = oauth_repo.find_token(conn, digest(pair[0]))
    refresh = oauth_repo.find_token(conn, digest(pair[1]))
    if access is None or refresh is None or access.family != row.family:
        return None
    if access.revoked_at is not None or refresh.revoked_at is not None:
        return None
    if refresh.rotated_at is not None:  # the new pair was already used: this is a replay
        return None
    return RetriedPair(pair[0], pair[1], max(0, access.expires_at - now))
