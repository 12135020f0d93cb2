"""API keys: issued once, stored as a hash, at most one active per account.

>>> key = new_api_key()
>>> key.startswith("psk_") and len(key) == 47 and looks_like_api_key(key)
True
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass

from paysign.clock import Clock
from paysign.errors import InvalidKeyExpiry, NoActiveKey
from paysign.services.accounts import require_account
from paysign.store import repositories as repo
from paysign.store.database import Database

API_KEY_PREFIX = "psk_"
MAX_EXPIRY_DAYS = 365
DEFAULT_EXPIRY_DAYS = 90
DAY = 86_400
_SHAPE = re.compile(r"^psk_[A-Za-z0-9_-]{43}$")
# Only used after a fresh signature: a coarse "last used" costs no extra write per request.
LAST_USED_RESOLUTION_SECONDS = 60


@dataclass(frozen=True, slots=True)
class IssuedKey:
    api_key: str
    expires_at: int

    def __repr__(self) -> str:  # never let the key reach a log through a repr
        return f"IssuedKey(api_key='psk_…', expires_at={self.expires_at})"


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def looks_like_api_key(text: str) -> bool:
    return bool(_SHAPE.match(text))


def hash_api_key(key: str) -> bytes:
    return hashlib.sha256(key.encode("ascii")).digest()


def issue_key(
    db: Database, clock: Clock, *, email: str, expires_in_days: int = DEFAULT_EXPIRY_DAYS
) -> IssuedKey:
    if isinstance(expires_in_days, bool) or not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
        raise InvalidKeyExpiry(
            f"expiry must be 1 to {MAX_EXPIRY_DAYS} days; {expires_in_days} was asked"
        )
    account = require_account(db, email)
    key = new_api_key()
    now = clock.now()
    expires_at = now + expires_in_days * DAY
    with db.write() as conn:
        repo.retire_expired_keys(conn, account.id, now)
        repo.insert_api_key(
            conn,
            key_id=str(uuid.uuid4()),
            account_id=account.id,
            key_hash=hash_api_key(key),
            display_prefix=key[:8],
            now=now,
            expires_at=expires_at,
        )
    return IssuedKey(key, expires_at)


def revoke_key(db: Database, clock: Clock, *, email: str) -> None:
    account = require_account(db, email)
    with db.write() as conn:
        if repo.revoke_active_keys(conn, account.id, clock.now()) == 0:
            raise NoActiveKey(f"{account.email} has no active API key")


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None
