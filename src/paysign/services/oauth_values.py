"""The OAuth configuration and the values the use cases in ``oauth_grants`` take and return:
a pending sign-in, a code's grant, a token's grant, the tokens issued, who a token acts for.
Every secret is kept as its ``digest``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from paysign.config import Settings


def digest(secret: str) -> str:
    """How a secret handed out (transaction id, code, token) is stored: its SHA-256, in hex."""
    return hashlib.sha256(secret.encode()).hexdigest()


#: Asked for by clients that want a refresh token; every grant has one, so it is accepted and
#: changes nothing.
OFFLINE_ACCESS = "offline_access"


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    issuer: str
    mcp_url: str
    scope: str
    code_ttl: int
    access_ttl: int
    refresh_ttl: int
    refresh_grace: int
    request_ttl: int
    max_failures_account: int
    max_failures_address: int
    failure_window: int

    @classmethod
    def from_settings(cls, settings: Settings) -> OAuthConfig:
        mcp_url = settings.resolved_mcp_url
        return cls(
            issuer=settings.resolved_auth_url,
            mcp_url=mcp_url,
            scope=f"{mcp_url}/access",
            code_ttl=min(settings.oauth_code_ttl_seconds, 60),
            access_ttl=settings.oauth_access_token_ttl_seconds,
            refresh_ttl=settings.oauth_refresh_token_ttl_seconds,
            refresh_grace=settings.oauth_refresh_retry_grace_seconds,
            request_ttl=settings.oauth_sign_in_ttl_seconds,
            max_failures_account=settings.oauth_max_failures_per_account,
            max_failures_address=settings.oauth_max_failures_per_address,
            failure_window=settings.oauth_failure_window_seconds,
        )


@dataclass(frozen=True, slots=True)
class PendingRequest:
    client_id: str
    params: dict[str, Any]
    csrf: str
    signed_in: bool


@dataclass(frozen=True, slots=True)
class CodeGrant:
    client_id: str
    account_id: str
    params: dict[str, Any]
    expires_in: int


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """A refresh token (or access token) as loaded: who, for what, for how long."""

    family: str
    client_id: str
    account_id: str
    scopes: list[str]
    resource: str
    expires_in: int


@dataclass(frozen=True, slots=True)
class IssuedTokens:
    access_token: str
    refresh_token: str
    expires_in: int
    scopes: list[str]


@dataclass(frozen=True, slots=True)
class OAuthPrincipal:
    account_id: str
    client_id: str
