"""The authorization server's HTTP surface at ``{auth_url}``.

The SDK's handlers serve ``/authorize``, ``/token``, ``/register`` and ``/revoke``. We replace
the metadata (RFC 8414: the issuer is ``{auth_url}`` byte for byte, ``none`` client auth and
the RFC 9207 ``iss`` parameter advertised), add ``registration_client_uri`` to registration
responses (with an RFC 7592 read endpoint), bound registration (requests per address, the
body's size: the SDK reads any body whole), refuse a token request whose RFC 8707 ``resource``
is not ``{mcp_url}`` (the SDK's token handler drops it), and add the sign-in pages.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.settings import ClientRegistrationOptions
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from paysign.http.asgi_body import read_body, replaying
from paysign.http.cors import open_to_browsers
from paysign.oauth.basic_credentials import BasicCredentials
from paysign.oauth.client_auth import DigestClientAuthenticator
from paysign.oauth.pages import SignInPages
from paysign.oauth.provider import PaysignProvider
from paysign.services.oauth_clients import MAX_BODY_BYTES, TOO_LARGE, Registrations
from paysign.services.oauth_grants import OFFLINE_ACCESS, AuthorizationService, OAuthConfig
from paysign.services.oauth_refusals import TooManyAuthorizations, TooManyRegistrations

METADATA = "/.well-known/oauth-authorization-server"
_AUTH_METHODS = ["client_secret_post", "client_secret_basic", "none"]
_NO_STORE = {"Cache-Control": "no-store"}
_ERROR_FIELDS = ("error", "error_description", "state")


def authorization_server_metadata(config: OAuthConfig) -> dict[str, Any]:
    issuer = config.issuer
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "revocation_endpoint": f"{issuer}/revoke",
        "scopes_supported": [config.scope, OFFLINE_ACCESS],
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": _AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": _AUTH_METHODS,
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
    }


def metadata_paths(issuer: str) -> list[str]:
    """RFC 8414 §3.1 path insertion (what the MCP SDK client probes first), the metadata under
    the issuer's own path (what some clients try), and at the origin root: clients of the
    2025-03-26 MCP authorization spec look there, whatever the issuer's path."""
    path = urlsplit(issuer).path.rstrip("/")
    return list(dict.fromkeys([METADATA + path, path + METADATA, METADATA]))


#: A token request is a few hundred bytes; past this the body is handed on unread.
_MAX_FORM_BYTES = 64 * 1024


class ResourceCheckedToken:
    """The SDK token endpoint, after refusing an RFC 8707 ``resource`` other than ours."""

    def __init__(self, app: ASGIApp, mcp_url: str) -> None:
        self.app = app
        self.mcp_url = mcp_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more = await read_body(receive, _MAX_FORM_BYTES)
        resources = parse_qs(body.decode("latin-1")).get("resource", [])
        if any(resource != self.mcp_url for resource in resources):
            response = JSONResponse(
                {
                    "error": "invalid_target",
                    "error_description": f"tokens are only issued for {self.mcp_url}",
                },
                status_code=400,
                headers=_NO_STORE,
            )
            await response(scope, receive, send)
            return
        await self.app(scope, replaying(body, more, receive), send)


class SmallForm:
    """An OAuth endpoint whose ``POST`` is a form, as RFC 6749 has it, of at most
    ``_MAX_FORM_BYTES``. Anything else is refused unread: a larger form would be held whole by
    Starlette's parser (up to 1,000 fields of 1 MB, for anyone, signed in or not), and another
    type reached the SDK's handlers as an unexpected error (``server_error``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        media_type = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
        if media_type != b"application/x-www-form-urlencoded":
            await _invalid_request(400, "send the parameters as a form", scope, receive, send)
            return
        declared = headers.get(b"content-length", b"")
        too_large = declared.isdigit() and int(declared) > _MAX_FORM_BYTES
        if not too_large:
            body, more = await read_body(receive, _MAX_FORM_BYTES)
            too_large = more or len(body) > _MAX_FORM_BYTES
        if too_large:
            why = f"the request body is larger than {_MAX_FORM_BYTES // 1024} KiB"
            await _invalid_request(413, why, scope, receive, send)
            return
        await self.app(scope, replaying(body, False, receive), send)


async def _invalid_request(
    status: int, description: str, scope: Scope, receive: Receive, send: Send
) -> None:
    response = JSONResponse(
        {"error": "invalid_request", "error_description": description},
        status_code=status,
        headers=_NO_STORE,
    )
    await response(scope, receive, send)


async def bounded_body(request: Request, limit: int) -> bytes | None:
    """The request body, or ``None`` once it is longer than ``limit`` (the rest unread)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _with_body(request: Request, body: bytes) -> Request:
    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(request.scope, receive)


def _errors_redirected_once_granted(
    provider: PaysignProvider, registrations: Registrations
) -> Callable[[Request], Awaitable[Response]]:
    """The SDK's authorization endpoint, whose errors go back to the client's redirect URI only
    once a holder has granted that client a code (RFC 9700 §4.11.2).

    Registration is open: anyone can register a client whose redirect URI is their own page,
    then hand out an authorization link of ours that fails at once (no PKCE challenge, say).
    Redirected, it would take whoever follows it from our address to theirs. Until a holder
    trusts the client, the error is shown here instead, as the SDK shows an unknown client's.
    """
    handler = AuthorizationHandler(provider)

    async def authorize(request: Request) -> Response:
        address = request.client.host if request.client else "unknown"
        try:
            await run_in_threadpool(provider.service.admit, address)
        except TooManyAuthorizations as limited:
            return JSONResponse(
                {"error": "temporarily_unavailable", "error_description": limited.description},
                status_code=429,
                headers={"Retry-After": str(limited.retry_after), **_NO_STORE},
            )
        response = await handler.handle(request)
        location = response.headers.get("location", "") if response.status_code == 302 else ""
        query = parse_qs(urlsplit(location).query)
        if "error" not in query:
            return response  # on to the sign-in page, or not redirected at all
        # The handler read the same request's parameters (Starlette keeps its form).
        params = request.query_params if request.method == "GET" else await request.form()
        client_id = params.get("client_id")
        if isinstance(client_id, str) and await run_in_threadpool(
            registrations.was_granted, client_id
        ):
            return response
        shown = {key: values[0] for key, values in query.items() if key in _ERROR_FIELDS}
        return JSONResponse(shown, status_code=400, headers=_NO_STORE)

    return authorize


def create_oauth_routes(
    service: AuthorizationService, registrations: Registrations
) -> list[BaseRoute]:
    config = service.config
    issuer = config.issuer
    base = urlsplit(issuer).path.rstrip("/")
    provider = PaysignProvider(service, registrations, f"{issuer}/login")
    pages = SignInPages(service, f"{issuer}/login", f"{issuer}/consent")
    authenticator = DigestClientAuthenticator(provider, registrations)
    registration = RegistrationHandler(
        provider,
        options=ClientRegistrationOptions(
            enabled=True,
            valid_scopes=[config.scope, OFFLINE_ACCESS],
            default_scopes=[config.scope],
        ),
    )
    metadata = authorization_server_metadata(config)

    async def metadata_endpoint(request: Request) -> Response:
        return JSONResponse(metadata)

    async def register(request: Request) -> Response:
        address = request.client.host if request.client else "unknown"
        try:
            await run_in_threadpool(registrations.admit, address)
        except TooManyRegistrations as limited:
            return JSONResponse(
                {"error": "temporarily_unavailable", "error_description": limited.description},
                status_code=429,
                headers={"Retry-After": str(limited.retry_after), **_NO_STORE},
            )
        body = await bounded_body(request, MAX_BODY_BYTES)
        if body is None:
            return JSONResponse(
                {"error": "invalid_client_metadata", "error_description": TOO_LARGE},
                status_code=413,
                headers={"Connection": "close", **_NO_STORE},
            )
        response = await registration.handle(_with_body(request, body))
        if response.status_code != 201:
            return response
        document = json.loads(bytes(response.body))
        client_id = document["client_id"]
        document["registration_client_uri"] = f"{issuer}/register/{client_id}"
        document["registration_access_token"] = provider.registration_tokens.pop(client_id)
        return JSONResponse(document, status_code=201, headers=_NO_STORE)

    async def read_registration(request: Request) -> Response:
        """RFC 7592 §2.1: the client's registration, with its registration access token."""
        client_id = request.path_params["client_id"]
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        found = await run_in_threadpool(registrations.for_registration_token, client_id, token)
        if found is None:
            return JSONResponse({"error": "invalid_token"}, status_code=401, headers=_NO_STORE)
        found["registration_client_uri"] = f"{issuer}/register/{client_id}"
        return JSONResponse(found, headers=_NO_STORE)

    token_app = request_response(TokenHandler(provider, authenticator).handle)
    # What a browser-based client calls from its own origin (the authorization endpoint and
    # the sign-in pages are navigations, not fetches: no CORS there).
    get, post = ["GET", "OPTIONS"], ["POST", "OPTIONS"]
    routes: list[BaseRoute] = [
        *(
            Route(path, open_to_browsers(request_response(metadata_endpoint), get), methods=get)
            for path in metadata_paths(issuer)
        ),
        Route(
            f"{base}/authorize",
            SmallForm(request_response(_errors_redirected_once_granted(provider, registrations))),
            methods=["GET", "POST"],
        ),
        Route(
            f"{base}/token",
            open_to_browsers(
                SmallForm(ResourceCheckedToken(BasicCredentials(token_app), config.mcp_url)),
                post,
            ),
            methods=post,
        ),
        Route(f"{base}/register", open_to_browsers(request_response(register), post), methods=post),
        Route(f"{base}/register/{{client_id}}", read_registration, methods=["GET"]),
        Route(
            f"{base}/revoke",
            SmallForm(
                BasicCredentials(
                    request_response(RevocationHandler(provider, authenticator).handle)
                )
            ),
            methods=["POST"],
        ),
        Route(f"{base}/login", pages.login, methods=["GET", "POST"]),
        Route(f"{base}/consent", pages.consent, methods=["GET", "POST"]),
    ]
    return routes
