"""The OAuth use cases: sign-in (password + authenticator code), consent bound to the browser
that signed in, authorization codes, tokens with rotation, revocation, and resolving an access
token. Registering clients is ``oauth_clients``; which redirects are allowed,
``oauth_redirects``; what is refused and how it reads, ``oauth_refusals``; the configuration
and the values these use cases take and return, ``oauth_values`` (re-exported here).

Synchronous, one short transaction each: the entry points run them in a worker thread. Every
secret handed out (transaction id, code, token, registration access token) is random and stored
only as its SHA-256.
"""

from __future__ import annotations

import hmac
import json
import secrets
import uuid
from typing import Any

from sqlalchemy.engine import Connection

from paysign.clock import Clock
from paysign.custody import KeyVault
from paysign.services.client_network import client_network
from paysign.services.oauth_redirects import redirect_uri_problem
from paysign.services.oauth_refresh import new_successor_key, retried_pair, successor_pair
from paysign.services.oauth_refusals import (
    FORM_EXPIRED,
    LINK_USED,
    NOT_THIS_BROWSER,
    REQUEST_USED,
    NotThisBrowser,
    RequestExpired,
    SignInFailed,
    TooManyAuthorizations,
)
from paysign.services.oauth_values import (
    OFFLINE_ACCESS,
    CodeGrant,
    IssuedTokens,
    OAuthConfig,
    OAuthPrincipal,
    PendingRequest,
    TokenGrant,
    digest,
)
from paysign.services.sign_in import CredentialCheck, CredentialsRefused, SignInLimits
from paysign.store import oauth_repo, sign_in_repo
from paysign.store import repositories as repo
from paysign.store.database import Database

#: Authorization requests one network may make in a request's lifetime (``request_ttl``):
#: enough for an office connecting its assistants at once.
AUTHORIZATIONS_PER_NETWORK = 60
AUTHORIZE_KEY_PREFIX = "authorize:"


class AuthorizationService:
    def __init__(self, db: Database, vault: KeyVault, clock: Clock, config: OAuthConfig) -> None:
        self.db = db
        self.vault = vault
        self.clock = clock
        self.config = config
        self.credentials = CredentialCheck(
            db,
            vault,
            clock,
            SignInLimits(
                config.max_failures_account, config.max_failures_address, config.failure_window
            ),
        )

    def client(self, client_id: str) -> dict[str, Any] | None:
        """A registered client's metadata (registration itself is ``oauth_clients``)."""
        with self.db.read() as conn:
            row = oauth_repo.find_client(conn, client_id)
        return None if row is None else dict(json.loads(row.metadata))

    # ---- the authorization request, sign-in and consent ----

    def admit(self, address: str) -> None:
        """Count an authorization request from the address before anything of it is stored;
        raises :class:`TooManyAuthorizations` past the limit. Each request is kept until it
        expires, before anyone has signed in, so this bounds what one network can leave in
        the database (an IPv6 /64 is one network)."""
        now = self.clock.now()
        window = self.config.request_ttl
        key = AUTHORIZE_KEY_PREFIX + client_network(address)
        with self.db.write() as conn:
            sign_in_repo.purge_counts(conn, AUTHORIZE_KEY_PREFIX, now - window)
            count, started = sign_in_repo.count_event(conn, key, now, window)
        if count > AUTHORIZATIONS_PER_NETWORK:
            raise TooManyAuthorizations(max(1, started + window - now))

    def start(self, client_id: str, params: dict[str, Any]) -> str:
        """Remember an authorization request; returns the transaction id the pages carry."""
        txn = secrets.token_urlsafe(32)
        now = self.clock.now()
        with self.db.write() as conn:
            oauth_repo.purge_expired(conn, now)
            oauth_repo.insert_request(
                conn,
                digest(txn),
                client_id,
                json.dumps(params),
                secrets.token_urlsafe(24),
                now + self.config.request_ttl,
            )
        return txn

    def _request(self, txn: str) -> oauth_repo.RequestRow:
        with self.db.read() as conn:
            row = oauth_repo.find_request(conn, digest(txn), self.clock.now())
        if row is None:
            raise RequestExpired(LINK_USED)
        return row

    def pending(
        self, txn: str, browser: str | None = None, *, consent: bool = False
    ) -> PendingRequest:
        """The request. For its consent page (``consent``), once signed in, only for the
        browser holding the sign-in cookie's value: :class:`NotThisBrowser` for any other."""
        row = self._request(txn)
        signed_in = row.account_id is not None
        if consent and signed_in and not _same_browser(row, browser):
            raise NotThisBrowser(NOT_THIS_BROWSER)
        return PendingRequest(row.client_id, json.loads(row.params), row.csrf, signed_in)

    def sign_in(
        self, txn: str, csrf: str, email: str, password: str, code: str, address: str
    ) -> str:
        """Check the password and a fresh authenticator code; rate-limited per account and per
        client address. Every failure gets the same message (no user enumeration). Returns
        the value of the cookie that binds the request to this browser."""
        pending = self.pending(txn)
        if pending.signed_in:
            raise RequestExpired(LINK_USED)
        if not hmac.compare_digest(pending.csrf, csrf):
            raise RequestExpired(FORM_EXPIRED)
        new_csrf, browser = secrets.token_urlsafe(24), secrets.token_urlsafe(32)
        now = self.clock.now()

        def signed_in(conn: Connection, account: repo.AccountRecord) -> None:
            # A new CSRF token for the consent form (a fresh secret after authentication);
            # a request signed in to meanwhile keeps its first browser (and the authenticator
            # code stays unspent: the transaction is rolled back).
            if not oauth_repo.sign_in_request(
                conn, digest(txn), csrf, account.id, new_csrf, digest(browser), now
            ):
                raise RequestExpired(LINK_USED)

        try:
            self.credentials.sign_in(email, password, code, address, on_success=signed_in)
        except CredentialsRefused as refused:
            raise SignInFailed(refused.message) from None
        return browser

    def decide(
        self, txn: str, csrf: str, browser: str | None, *, approve: bool
    ) -> tuple[PendingRequest, str | None]:
        """Consume the signed-in request, from the browser that signed in. Approve: returns it
        with a new authorization code; deny: with ``None``."""
        now = self.clock.now()
        with self.db.write() as conn:
            seen = oauth_repo.find_request(conn, digest(txn), now)
            if seen is None or seen.account_id is None:
                raise RequestExpired(REQUEST_USED)
            if not _same_browser(seen, browser):
                raise NotThisBrowser(NOT_THIS_BROWSER)
            if not hmac.compare_digest(seen.csrf, csrf):
                raise RequestExpired(REQUEST_USED)
            row = oauth_repo.take_request(conn, digest(txn), seen, now)
            if row is None or row.account_id is None:
                raise RequestExpired(REQUEST_USED)
            params = json.loads(row.params)
            pending = PendingRequest(row.client_id, params, row.csrf, True)
            if not approve:
                return pending, None
            # The code goes only to a redirect the client still has registered (a client
            # never granted a code before may have expired since the request began).
            registered = _registered(conn, row.client_id, params["redirect_uri"])
            if not registered or not oauth_repo.mark_client_granted(conn, row.client_id, now):
                raise RequestExpired(REQUEST_USED)
            code = secrets.token_urlsafe(32)  # 256 bits
            oauth_repo.insert_code(
                conn,
                digest(code),
                row.client_id,
                row.account_id,
                row.params,
                now + self.config.code_ttl,
            )
        return pending, code

    # ---- codes and tokens ----

    def load_code(self, code: str) -> CodeGrant | None:
        """A usable code; presenting a used code again revokes what it was exchanged for."""
        now = self.clock.now()
        code_hash = digest(code)
        with self.db.read() as conn:
            row = oauth_repo.find_code(conn, code_hash)
        if row is None or row.expires_at <= now:
            return None
        if row.used_at is not None:
            with self.db.write() as conn:
                oauth_repo.revoke_family(conn, _family_of(code_hash), now)
            return None
        return CodeGrant(
            row.client_id, row.account_id, json.loads(row.params), row.expires_at - now
        )

    def exchange_code(self, code: str, grant: CodeGrant) -> IssuedTokens | None:
        now = self.clock.now()
        code_hash = digest(code)
        with self.db.write() as conn:
            if not oauth_repo.use_code(conn, code_hash, now):
                oauth_repo.revoke_family(conn, _family_of(code_hash), now)
                return None
            return self._issue(conn, _family_of(code_hash), grant.client_id, grant.account_id, now)

    def load_refresh(self, token: str) -> TokenGrant | None:
        """A live refresh token, or one rotated moments ago whose new pair is untouched (a
        retry: ``oauth_refresh``). Presenting any other rotated one revokes its family."""
        now = self.clock.now()
        with self.db.read() as conn:
            row = oauth_repo.find_token(conn, digest(token))
            retry = (
                row is not None
                and row.rotated_at is not None
                and retried_pair(conn, self.vault, token, now, self.config.refresh_grace)
                is not None
            )
        if row is None or row.kind != "refresh" or row.revoked_at is not None:
            return None
        if row.rotated_at is not None and not retry:
            with self.db.write() as conn:
                oauth_repo.revoke_family(conn, row.family, now)
            return None
        if row.expires_at <= now:
            return None
        return TokenGrant(
            row.family,
            row.client_id,
            row.account_id,
            row.scopes.split(),
            row.resource,
            row.expires_at - now,
        )

    def rotate(self, token: str, grant: TokenGrant) -> IssuedTokens | None:
        now = self.clock.now()
        with self.db.write() as conn:
            if oauth_repo.rotate_token(conn, digest(token), now):
                sealed = oauth_repo.successor_key(conn, digest(token))
                pair = successor_pair(self.vault, sealed, token)
                return self._issue(conn, grant.family, grant.client_id, grant.account_id, now, pair)
            # Rotated already (by this client's lost request, or a racing one) or revoked.
            retried = retried_pair(conn, self.vault, token, now, self.config.refresh_grace)
            if retried is None:
                oauth_repo.revoke_family(conn, grant.family, now)
                return None
        return IssuedTokens(
            retried.access_token,
            retried.refresh_token,
            retried.access_expires_in,
            [self.config.scope],
        )

    def _issue(
        self,
        conn: Connection,
        family: str,
        client_id: str,
        account_id: str,
        now: int,
        pair: tuple[str, str] | None = None,
    ) -> IssuedTokens:
        access, refresh = pair or (secrets.token_urlsafe(32), secrets.token_urlsafe(32))

        def insert(token: str, kind: str, ttl: int, successor_key: bytes | None) -> None:
            oauth_repo.insert_token(
                conn,
                digest(token),
                kind=kind,
                family=family,
                client_id=client_id,
                account_id=account_id,
                scopes=self.config.scope,
                resource=self.config.mcp_url,
                expires_at=now + ttl,
                successor_key=successor_key,
            )

        insert(access, "access", self.config.access_ttl, None)
        insert(
            refresh,
            "refresh",
            self.config.refresh_ttl,
            new_successor_key(self.vault, digest(refresh)),
        )
        return IssuedTokens(access, refresh, self.config.access_ttl, [self.config.scope])

    def revoke(self, token: str, client_id: str) -> None:
        """RFC 7009: revoking either token of a pair revokes the pair and its family."""
        with self.db.write() as conn:
            row = oauth_repo.find_token(conn, digest(token))
            if row is not None and row.client_id == client_id:
                oauth_repo.revoke_family(conn, row.family, self.clock.now())

    def load_access(self, token: str) -> tuple[TokenGrant, bool] | None:
        """The access token and whether it is live (unexpired, unrevoked)."""
        with self.db.read() as conn:
            row = oauth_repo.find_token(conn, digest(token))
        if row is None or row.kind != "access":
            return None
        now = self.clock.now()
        grant = TokenGrant(
            row.family,
            row.client_id,
            row.account_id,
            row.scopes.split(),
            row.resource,
            row.expires_at - now,
        )
        return grant, row.revoked_at is None and row.expires_at > now

    def resolve(self, token: str) -> OAuthPrincipal | None:
        """Who a bearer token acts for at the connector: a live access token issued for
        ``{mcp_url}`` with the scope ``{mcp_url}/access``; otherwise ``None``."""
        found = self.load_access(token)
        if found is None:
            return None
        grant, live = found
        if not live or grant.resource != self.config.mcp_url:
            return None
        if self.config.scope not in grant.scopes:
            return None
        return OAuthPrincipal(grant.account_id, grant.client_id)


def _same_browser(row: oauth_repo.RequestRow, browser: str | None) -> bool:
    if row.browser_hash is None or not browser:
        return False
    return hmac.compare_digest(row.browser_hash, digest(browser))


def _registered(conn: Connection, client_id: str, redirect_uri: str) -> bool:
    client = oauth_repo.find_client(conn, client_id)
    if client is None:
        return False
    uris = json.loads(client.metadata).get("redirect_uris") or []
    return redirect_uri in uris and redirect_uri_problem(redirect_uri) is None


def _family_of(code_hash: str) -> str:
    """Every token issued from one code shares a family named after the code."""
    return str(uuid.UUID(code_hash[:32]))


__all__ = [
    "OFFLINE_ACCESS",
    "AuthorizationService",
    "CodeGrant",
    "IssuedTokens",
    "OAuthConfig",
    "OAuthPrincipal",
    "PendingRequest",
    "TokenGrant",
    "digest",
]
