"""Who is calling the connector: the credential resolver seam, the 401 challenge and the
protected-resource metadata (RFC 9728).

Spec 5.2 step 1 gives, to the byte, the challenge as ``Bearer
resource_metadata="{mcp_url}/.well-known/oauth-protected-resource", scope="{mcp_url}/access"``;
the header is that template, filled in. The spec also says the metadata address is "the
connector's address with the path ``/.well-known/oauth-protected-resource`` at its host root" —
the same thing when ``{mcp_url}`` is a host root; with a path (the default ``/mcp``) the document
is served at both places, and at the RFC 9728 location, so every reading finds it:

    >>> for part in challenge("http://127.0.0.1:8402/mcp").split(", "):
    ...     print(part)
    Bearer resource_metadata="http://127.0.0.1:8402/mcp/.well-known/oauth-protected-resource"
    scope="http://127.0.0.1:8402/mcp/access"
    >>> for path in metadata_paths("https://connector.example.com/mcp"):
    ...     print(path)
    /.well-known/oauth-protected-resource
    /.well-known/oauth-protected-resource/mcp
    /mcp/.well-known/oauth-protected-resource


Credentials: API keys (``ApiKeyResolver``) and, chained after them, OAuth access tokens from
our authorization server (``paysign.oauth.connector.OAuthResolver``, wired in ``paysign.app``).
A token neither accepts gets the same 401 as any invalid credential.
"""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import urlsplit

from paysign.errors import NotAuthenticated
from paysign.http.credentials import Principal, call_store
from paysign.services.signing import SigningDeps, authenticate, by_api_key

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def metadata_url(mcp_url: str) -> str:
    """The address the 401 challenge names: the spec's template, ``{mcp_url}`` + the path."""
    return mcp_url.rstrip("/") + WELL_KNOWN


def scope_of(mcp_url: str) -> str:
    return f"{mcp_url}/access"


def challenge(mcp_url: str, *, invalid: bool = False) -> str:
    error = 'error="invalid_token", ' if invalid else ""
    return f'Bearer {error}resource_metadata="{metadata_url(mcp_url)}", scope="{scope_of(mcp_url)}"'


def metadata_paths(mcp_url: str) -> list[str]:
    """Every path the protected-resource metadata is served at (on the connector's host)."""
    path = urlsplit(mcp_url).path.rstrip("/")
    paths = [WELL_KNOWN, WELL_KNOWN + path, path + WELL_KNOWN]
    return list(dict.fromkeys(p for p in paths if p))


def protected_resource_metadata(mcp_url: str, auth_url: str) -> dict[str, Any]:
    """RFC 9728 metadata; ``authorization_servers`` holds ``{auth_url}`` byte for byte (it must
    equal the authorization server's ``issuer``)."""
    return {
        "resource": mcp_url,
        "authorization_servers": [auth_url],
        "scopes_supported": [scope_of(mcp_url)],
        "bearer_methods_supported": ["header"],
        "resource_name": "paysign connector",
    }


class CredentialResolver(Protocol):
    async def resolve(self, token: str) -> Principal | None:
        """The principal for a bearer token; ``None`` when this resolver does not accept it."""
        ...


class ApiKeyResolver:
    def __init__(self, deps: SigningDeps) -> None:
        self._deps = deps

    async def resolve(self, token: str) -> Principal | None:
        try:
            holder = await call_store(self._deps, authenticate, self._deps, token)
        except NotAuthenticated:
            return None
        return Principal(
            holder.account_id, "api_key", f"api-key:{holder.key_id}", by_api_key(token)
        )


class ChainedResolver:
    """The first resolver that accepts the token wins (API key, then OAuth once it exists)."""

    def __init__(self, *resolvers: CredentialResolver) -> None:
        self._resolvers = resolvers

    async def resolve(self, token: str) -> Principal | None:
        for resolver in self._resolvers:
            principal = await resolver.resolve(token)
            if principal is not None:
                return principal
        return None
