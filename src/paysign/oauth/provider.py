"""The ``mcp`` SDK's ``OAuthAuthorizationServerProvider``, backed by ``AuthorizationService``.

The SDK's handlers do the protocol checks (PKCE S256 only, exact redirect match, client
authentication, scope subset); this adapter adds ours (https-only redirects, the resource
binding, single-use codes, refresh rotation, bounded registration). The SDK compares expiry
with the wall clock (``time.time()``) while we decide with the injected clock, so the lifetimes
handed to it are "remaining seconds from now" on the wall clock; the real check is ours.
"""

from __future__ import annotations

import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.concurrency import run_in_threadpool

from paysign.services.oauth_clients import Registrations
from paysign.services.oauth_grants import OFFLINE_ACCESS, AuthorizationService, IssuedTokens
from paysign.services.oauth_redirects import redirect_uri_problem
from paysign.services.oauth_refusals import ClientRefused

#: An OAuth client's ``state`` is an opaque value of a few dozen characters.
MAX_STATE_CHARS = 512


class FamilyRefreshToken(RefreshToken):
    family: str


class PaysignProvider(
    OAuthAuthorizationServerProvider[AuthorizationCode, "FamilyRefreshToken", AccessToken]
):
    """The identity-assertion grant (SEP-990) keeps the protocol's default: refused."""

    def __init__(
        self, service: AuthorizationService, registrations: Registrations, login_url: str
    ) -> None:
        self.service = service
        self.registrations = registrations
        self.config = service.config
        self.login_url = login_url
        #: Registration access tokens minted in ``register_client``, picked up (once) by the
        #: registration endpoint to put in its response.
        self.registration_tokens: dict[str, str] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        found = await run_in_threadpool(self.service.client, client_id)
        return None if found is None else OAuthClientInformationFull.model_validate(found)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        metadata = client_info.model_dump(mode="json", exclude_none=True)
        try:
            token = await run_in_threadpool(
                self.registrations.register, client_info.client_id, metadata
            )
        except ClientRefused as refused:
            raise RegistrationError(refused.error, refused.description) from None
        self.registration_tokens[client_info.client_id] = token

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        problem = redirect_uri_problem(str(params.redirect_uri))
        if problem is not None:  # a client stored before the rule, or seeded by hand
            raise AuthorizeError("invalid_request", problem)
        if params.state is not None and len(params.state) > MAX_STATE_CHARS:
            # Kept with the request until it expires, before anyone has signed in.
            raise AuthorizeError(
                "invalid_request", f"state is longer than {MAX_STATE_CHARS} characters"
            )
        if params.resource is not None and params.resource != self.config.mcp_url:
            raise AuthorizeError(
                "invalid_target", f"tokens are only issued for {self.config.mcp_url}"
            )
        scopes = params.scopes or [self.config.scope]
        if any(scope not in (self.config.scope, OFFLINE_ACCESS) for scope in scopes):
            raise AuthorizeError(
                "invalid_scope", f"the scopes are {self.config.scope} and {OFFLINE_ACCESS}"
            )
        stored = {
            "state": params.state,
            "scopes": scopes,
            "code_challenge": params.code_challenge,
            "redirect_uri": str(params.redirect_uri),
            "redirect_uri_provided_explicitly": params.redirect_uri_provided_explicitly,
            "resource": self.config.mcp_url,
        }
        txn = await run_in_threadpool(self.service.start, client.client_id, stored)
        return f"{self.login_url}?txn={txn}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        grant = await run_in_threadpool(self.service.load_code, authorization_code)
        if grant is None or grant.client_id != client.client_id:
            return None
        p = grant.params
        return AuthorizationCode(
            code=authorization_code,
            scopes=p["scopes"],
            expires_at=time.time() + grant.expires_in,
            client_id=grant.client_id,
            code_challenge=p["code_challenge"],
            redirect_uri=p["redirect_uri"],
            redirect_uri_provided_explicitly=p["redirect_uri_provided_explicitly"],
            resource=p["resource"],
            subject=grant.account_id,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        grant = await run_in_threadpool(self.service.load_code, authorization_code.code)
        issued = (
            None
            if grant is None
            else await run_in_threadpool(self.service.exchange_code, authorization_code.code, grant)
        )
        if issued is None:
            raise TokenError("invalid_grant", "the authorization code was already used")
        return _token(issued)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> FamilyRefreshToken | None:
        grant = await run_in_threadpool(self.service.load_refresh, refresh_token)
        if grant is None or grant.client_id != client.client_id:
            return None
        return FamilyRefreshToken(
            token=refresh_token,
            client_id=grant.client_id,
            # Every grant has a refresh token, so a refresh may ask for offline access again.
            scopes=[*grant.scopes, OFFLINE_ACCESS],
            expires_at=int(time.time()) + grant.expires_in,
            resource=grant.resource,
            subject=grant.account_id,
            family=grant.family,
        )

    async def exchange_refresh_token(
        self,
        client: OAuthClientInformationFull,
        refresh_token: FamilyRefreshToken,
        scopes: list[str],
    ) -> OAuthToken:
        grant = await run_in_threadpool(self.service.load_refresh, refresh_token.token)
        issued = (
            None
            if grant is None
            else await run_in_threadpool(self.service.rotate, refresh_token.token, grant)
        )
        if issued is None:
            raise TokenError("invalid_grant", "the refresh token was already used")
        return _token(issued)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = await run_in_threadpool(self.service.load_access, token)
        if found is None or not found[1]:
            return None
        grant = found[0]
        return AccessToken(
            token=token,
            client_id=grant.client_id,
            scopes=grant.scopes,
            expires_at=int(time.time()) + grant.expires_in,
            resource=grant.resource,
            subject=grant.account_id,
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        await run_in_threadpool(self.service.revoke, token.token, token.client_id)


def _token(issued: IssuedTokens) -> OAuthToken:
    return OAuthToken(
        access_token=issued.access_token,
        token_type="Bearer",  # noqa: S106 (the token type, not a secret)
        expires_in=issued.expires_in,
        scope=" ".join(issued.scopes),
        refresh_token=issued.refresh_token,
    )
