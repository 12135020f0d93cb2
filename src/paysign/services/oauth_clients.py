"""Dynamic client registration (RFC 7591) within bounds.

Anyone on the internet may register a client, so what one request, one address and the
passing days can leave in the database is bounded: the request body (64 KiB), each metadata
field, the number of redirect URIs, registrations per client address in a window (counted in
the shared database, so the limit holds across every server process), and a client that was
never granted a code is deleted a day after it registered.
"""

from __future__ import annotations

import hmac
import json
import secrets
import unicodedata
from dataclasses import dataclass
from typing import Any

from paysign.clock import Clock
from paysign.services.client_network import client_network
from paysign.services.oauth_grants import digest
from paysign.services.oauth_redirects import redirect_uri_problem
from paysign.services.oauth_refusals import ClientRefused, RedirectRefused, TooManyRegistrations
from paysign.store import oauth_repo, sign_in_repo
from paysign.store.database import Database

MAX_BODY_BYTES = 64 * 1024
MAX_REDIRECT_URIS = 20
MAX_URI_CHARS = 2048
# Longest text per field; a client name is shown on the consent page.
_TEXT_CHARS = {"client_name": 200, "software_id": 200, "software_version": 200, "scope": 2048}
_URI_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")
# (most entries, longest entry) per list field
_LIST_BOUNDS = {"contacts": (10, 320), "grant_types": (10, 100), "response_types": (10, 100)}
_MAX_JWKS_CHARS = 8 * 1024
# Characters that would let a client name read differently from what it is (bidi overrides).
_DISGUISING = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_KEY_PREFIX = "register:"
#: Where a client's secret is kept, as its SHA-256 (it is 32 random bytes: no slow hash needed).
SECRET_DIGEST = "client_secret_sha256"  # noqa: S105 (a field name)

TOO_LARGE = "the registration request is larger than 64 KiB"


@dataclass(frozen=True, slots=True)
class RegistrationLimits:
    per_address: int = 20
    window: int = 600
    ungranted_ttl: int = 24 * 3600


def _check_text(field: str, value: Any, limit: int) -> None:
    if not isinstance(value, str):
        raise ClientRefused(f"{field} must be a string")
    if len(value) > limit:
        raise ClientRefused(f"{field} is longer than {limit} characters")


def check_metadata(metadata: dict[str, Any]) -> None:
    """Refuse (:class:`ClientRefused`) metadata over its bounds or with a refused redirect.

    >>> check_metadata({"client_name": "Claude", "redirect_uris": ["https://claude.ai/cb"]})
    >>> check_metadata({"client_name": "x" * 201, "redirect_uris": ["https://a.example/"]})
    Traceback (most recent call last):
    paysign.services.oauth_refusals.ClientRefused: client_name is longer than 200 characters
    """
    for field, limit in _TEXT_CHARS.items():
        if field in metadata:
            _check_text(field, metadata[field], limit)
    name = str(metadata.get("client_name", ""))
    if any(unicodedata.category(c) == "Cc" or c in _DISGUISING for c in name):
        raise ClientRefused("client_name must not contain control characters")
    for field in _URI_FIELDS:
        if field in metadata:
            _check_text(field, metadata[field], MAX_URI_CHARS)
    for field, (most, longest) in _LIST_BOUNDS.items():
        entries = metadata.get(field) or []
        if len(entries) > most:
            raise ClientRefused(f"{field} has more than {most} entries")
        for entry in entries:
            _check_text(field, entry, longest)
    if "jwks" in metadata and len(json.dumps(metadata["jwks"])) > _MAX_JWKS_CHARS:
        raise ClientRefused(f"jwks is larger than {_MAX_JWKS_CHARS} characters")
    uris = metadata.get("redirect_uris") or []
    if len(uris) > MAX_REDIRECT_URIS:
        raise ClientRefused(f"redirect_uris has more than {MAX_REDIRECT_URIS} entries")
    for uri in uris:
        _check_text("redirect_uris", uri, MAX_URI_CHARS)
        problem = redirect_uri_problem(uri)
        if problem is not None:
            raise RedirectRefused(problem)


def stored_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata as stored: the client secret replaced by its digest, so a copy of the
    database holds none that authenticates.

    >>> stored_metadata({"client_name": "A", "client_secret": "s3cret"})[SECRET_DIGEST][:12]
    '1ec1c26b50d5'
    >>> "client_secret" in stored_metadata({"client_secret": "s3cret"})
    False
    """
    stored = {key: value for key, value in metadata.items() if key != "client_secret"}
    secret = metadata.get("client_secret")
    if isinstance(secret, str):
        stored[SECRET_DIGEST] = digest(secret)
    return stored


def address_key(address: str) -> str:
    """The counter an address's registrations go to. An IPv6 host usually holds a whole /64,
    so that is one address here; an IPv4-mapped address is its IPv4 address.

    >>> address_key("2001:db8::1") == address_key("2001:db8::2"), address_key("203.0.113.7")
    (True, 'register:203.0.113.7')
    """
    return _KEY_PREFIX + client_network(address)


class Registrations:
    def __init__(
        self, db: Database, clock: Clock, limits: RegistrationLimits | None = None
    ) -> None:
        self.db = db
        self.clock = clock
        self.limits = limits or RegistrationLimits()

    def admit(self, address: str) -> None:
        """Count a registration request from the address, before its body is read; raises
        :class:`TooManyRegistrations` over the limit. Refused requests count too."""
        now = self.clock.now()
        window = self.limits.window
        with self.db.write() as conn:
            count, started = sign_in_repo.count_event(conn, address_key(address), now, window)
        if count > self.limits.per_address:
            raise TooManyRegistrations(max(1, started + window - now))

    def register(self, client_id: str, metadata: dict[str, Any]) -> str:
        """Store a client, its secret (if it was issued one) as a digest; returns its
        registration access token (RFC 7592). Clients never granted a code and stale counters
        are purged on the way."""
        check_metadata(metadata)
        token = secrets.token_urlsafe(32)
        now = self.clock.now()
        stored = stored_metadata(metadata)
        with self.db.write() as conn:
            oauth_repo.purge_ungranted_clients(conn, now - self.limits.ungranted_ttl)
            sign_in_repo.purge_counts(conn, _KEY_PREFIX, now - self.limits.window)
            oauth_repo.insert_client(conn, client_id, json.dumps(stored), digest(token), now)
        return token

    def secret_matches(self, client_id: str, presented: str) -> bool:
        """Whether ``presented`` is the secret the client was issued (compared as digests, in
        constant time)."""
        with self.db.read() as conn:
            row = oauth_repo.find_client(conn, client_id)
        stored = None if row is None else json.loads(row.metadata).get(SECRET_DIGEST)
        return isinstance(stored, str) and hmac.compare_digest(stored, digest(presented))

    def was_granted(self, client_id: str) -> bool:
        """Whether a holder has ever granted the client a code: until then, anyone may have
        registered it, with any redirect URI."""
        with self.db.read() as conn:
            return oauth_repo.client_was_granted(conn, client_id)

    def for_registration_token(self, client_id: str, token: str) -> dict[str, Any] | None:
        """The client's registration (RFC 7592 §2.1), or ``None`` for a wrong token. Only the
        secret's digest is kept, so a client that has a secret is issued a new one, which the
        answer carries; the old one stops working (as RFC 7592 §3 allows)."""
        with self.db.write() as conn:
            row = oauth_repo.find_client(conn, client_id)
            if row is None or not hmac.compare_digest(row.registration_token_hash, digest(token)):
                return None
            metadata = dict(json.loads(row.metadata))
            if SECRET_DIGEST not in metadata:
                return metadata
            metadata.pop(SECRET_DIGEST)
            metadata["client_secret"] = secrets.token_hex(32)
            oauth_repo.update_client_metadata(
                conn, client_id, json.dumps(stored_metadata(metadata))
            )
        return metadata
