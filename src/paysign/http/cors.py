"""CORS for the endpoints a browser-based MCP client calls across origins: the discovery
metadata, client registration, the token endpoint and the connector.

Any origin, never credentials: these endpoints authenticate by a bearer token or a client
secret the caller sends itself, never by a cookie, so a page on another origin gains nothing a
script outside a browser could not already do. The portal and the signing API are never
wrapped: the portal's session cookie must stay same-origin.
"""

from __future__ import annotations

from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

#: What an MCP client sends: the bearer token, the JSON-RPC body and the MCP transport headers.
REQUEST_HEADERS = [
    "Authorization",
    "Content-Type",
    "Accept",
    "Mcp-Protocol-Version",
    "Mcp-Session-Id",
    "Last-Event-ID",
]
#: What it must read: the 401 challenge (to find the authorization server), the session id.
RESPONSE_HEADERS = ["WWW-Authenticate", "Mcp-Session-Id", "Mcp-Protocol-Version"]


class _AnswerOptions:
    """A plain ``OPTIONS`` (not a preflight) is answered with the methods, never handed to an
    endpoint that would read it as a registration or a token request."""

    def __init__(self, app: ASGIApp, methods: list[str]) -> None:
        self.app = app
        self.allow = ", ".join(methods)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "OPTIONS":
            await Response(status_code=204, headers={"Allow": self.allow})(scope, receive, send)
            return
        await self.app(scope, receive, send)


def open_to_browsers(app: ASGIApp, methods: list[str]) -> ASGIApp:
    """``app`` answering CORS preflight requests (``OPTIONS``) and marking its responses
    readable from any origin; the route must allow ``OPTIONS`` too."""
    return CORSMiddleware(
        _AnswerOptions(app, methods),
        allow_origins=["*"],
        allow_methods=methods,
        allow_headers=REQUEST_HEADERS,
        allow_credentials=False,
        expose_headers=RESPONSE_HEADERS,
        max_age=600,
    )
