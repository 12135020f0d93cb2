"""The connector's side of OAuth: resolving an access token to the account it acts for.

The token is checked here (live, bound to ``{mcp_url}``); the signing use case then finds the
payer by that account, so the source policy and the caps apply exactly as for an API key.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from paysign.http.credentials import Principal
from paysign.services.oauth_grants import AuthorizationService
from paysign.services.signing import by_account

OAUTH = "oauth"


class OAuthResolver:
    """A ``CredentialResolver``: a live access token issued for ``{mcp_url}``."""

    def __init__(self, service: AuthorizationService) -> None:
        self.service = service

    async def resolve(self, token: str) -> Principal | None:
        if token.startswith("psk_"):
            return None  # an API key: the API key resolver's
        found = await run_in_threadpool(self.service.resolve, token)
        if found is None:
            return None
        return Principal(
            found.account_id, OAUTH, f"oauth:{found.client_id}", by_account(found.account_id)
        )
