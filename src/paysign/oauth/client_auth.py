"""Client authentication at the token and revocation endpoints, against the secret's digest.

The MCP SDK's ``ClientAuthenticator`` compares the presented secret with the one in the
client's stored metadata, so it needs the secret itself kept. paysign keeps only its SHA-256
(``services.oauth_clients.stored_metadata``): this authenticator takes the secret where the
client's registered method puts it (RFC 6749 §2.3.1) and asks the registrations whether it
matches. The SDK's handlers call it as they would the SDK's own.
"""

from __future__ import annotations

import time
from typing import Any

from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import OAuthAuthorizationServerProvider
from mcp.shared.auth import OAuthClientInformationFull
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from paysign.oauth.basic_credentials import basic_credentials
from paysign.services.oauth_clients import Registrations


class DigestClientAuthenticator(ClientAuthenticator):
    """A client is who it says when the secret it presents hashes to the stored digest."""

    def __init__(
        self,
        provider: OAuthAuthorizationServerProvider[Any, Any, Any],
        registrations: Registrations,
    ) -> None:
        super().__init__(provider)
        self.registrations = registrations

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        client_id = form.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("Missing client_id")
        client = await self.provider.get_client(client_id)
        if client is None:
            raise AuthenticationError("Invalid client_id")
        method = client.token_endpoint_auth_method
        if method == "none":
            return client
        if method == "client_secret_basic":
            credentials = basic_credentials(request.headers.get("authorization", ""))
            if credentials is None:
                raise AuthenticationError(
                    "Missing or invalid Basic authentication in Authorization header"
                )
            if credentials[0] != client_id:
                raise AuthenticationError("Client ID mismatch in Basic auth")
            presented: object = credentials[1]
        elif method == "client_secret_post":
            presented = form.get("client_secret")
        else:
            raise AuthenticationError(f"Unsupported auth method: {method}")
        if not isinstance(presented, str) or not presented:
            raise AuthenticationError("Client secret is required")
        if not await run_in_threadpool(self.registrations.secret_matches, client_id, presented):
            raise AuthenticationError("Invalid client_secret")
        expires = client.client_secret_expires_at
        if expires and expires < int(time.time()):
            raise AuthenticationError("Client secret has expired")
        return client
