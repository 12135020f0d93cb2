"""The connector's side of OAuth: resolving an access token to the account it acts for.

Paying needs a signing entry point that takes an already-authenticated account
(``services.signing.sign_payment`` authenticates an API key itself). Until it exists, a tool
call that would pay answers with a clear tool error; listing tools and ``search_bazaar`` work.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool

from paysign.connector.auth import Principal
from paysign.connector.payment import ToolFailure
from paysign.connector.server import Connector
from paysign.connector.tools import SEARCH_BAZAAR
from paysign.oauth.service import AuthorizationService

OAUTH = "oauth"
PAYING_UNAVAILABLE = "paying with OAuth sign-in is not available yet"


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
        # No signing credential: sign_payment only takes an API key (see the module doc).
        return Principal(found.account_id, OAUTH, f"oauth:{found.client_id}", "")


class OAuthAwareConnector(Connector):
    async def _dispatch(
        self, principal: Principal, name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        if principal.kind == OAUTH and name != SEARCH_BAZAAR:
            raise ToolFailure(
                "oauth-payments-unavailable",
                f"{PAYING_UNAVAILABLE}: nothing was called and nothing was paid.",
                "Ask the user to connect with a paysign API key (Authorization: Bearer "
                "<API_KEY>) to pay, or use search_bazaar meanwhile.",
            )
        return await super()._dispatch(principal, name, arguments)
