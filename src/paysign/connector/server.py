"""The connector: the official ``mcp`` SDK's low-level ``Server`` behind our own ASGI endpoint.

* One endpoint serves both protocol eras (the SDK routes on ``MCP-Protocol-Version``):
  handshake-era clients (2024-11-05 … 2025-11-25) get stateful sessions (``Mcp-Session-Id``, a
  GET SSE stream); 2026-07-28 clients get the stateless per-request envelope.
* ``connector_stateless``: handshake-era clients get no session either. A session lives in one
  process's memory, so under several workers the next request of a client may reach a process
  that never saw it; without sessions any process answers any request. They lose the GET stream
  (answered 405) and with it ``notifications/tools/list_changed``.
* ``tools.listChanged`` is advertised. A watcher polls the catalog version and on a change sends
  ``notifications/tools/list_changed`` to every open handshake-era session and publishes
  ``ToolsListChanged`` on the subscription bus (``subscriptions/listen``, 2026-07-28).
* Auth happens here, before the SDK sees the request: no credential → 401 with the spec's
  challenge; a credential nobody accepts → 401 with ``error="invalid_token"``; both with the
  body ``{"message":"Unauthorized"}``. The principal goes into ``scope["user"]`` so the SDK binds
  each session to the credential that opened it; without sessions every request is checked alone.
  Each credential holds a bounded number of sessions (``sessions.py``).
* ``uvicorn`` runs the app with ``lifespan="off"``, so the session manager is started on the
  first request, in a task that lives as long as the event loop (``close`` stops it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import weakref
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.connection import Connection
from mcp.server.lowlevel import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from paysign.catalog.tool_names import PAY_X402, SEARCH_BAZAAR, WALLET_STATUS
from paysign.config import Settings
from paysign.connector.auth import ApiKeyResolver, CredentialResolver, challenge, scope_of
from paysign.connector.bazaar import search_bazaar
from paysign.connector.builtin_tools import (
    PAY_X402_TOOL,
    SEARCH_BAZAAR_TOOL,
    WALLET_STATUS_TOOL,
    bazaar_search,
    pay_x402_call,
    wallet_status,
)
from paysign.connector.outbound import Outbound, OutboundLimits, OutboundRefused
from paysign.connector.payment import ToolFailure, pay, seller_text
from paysign.connector.sessions import SESSION_HEADER, SessionLimits, session_manager
from paysign.connector.tools import TOOL_TIERS, catalog_tools, listing_call
from paysign.http.credentials import UNAUTHORIZED_BODY, Principal
from paysign.policy.seller import seller_location
from paysign.services.budget import Budget
from paysign.services.catalog import Catalog, CatalogSnapshot
from paysign.services.keys import bearer_token
from paysign.services.signing import SigningDeps

log = logging.getLogger(__name__)

PRINCIPAL_KEY = "paysign.principal"
INSTRUCTIONS = (
    "paysign pays x402 APIs for the user in USDC on Base. Each catalog tool calls one paid API "
    "and pays it; pay_x402 pays any x402 URL; search_bazaar finds x402 endpoints. Payments "
    "follow the user's source policy and spend caps. When a tool answers with an error, do what "
    "its whatToDo says: usually ask the user, never retry in a loop."
)


class ConnectorServer(Server[Any]):
    """Advertises ``tools.listChanged`` (the SDK's default options leave it false)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def _tool_error(failure: ToolFailure) -> types.CallToolResult:
    document = failure.document()
    text = f"{failure.detail}\nWhat to do: {failure.what_to_do}"
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=text),
            types.TextContent(type="text", text=json.dumps(document)),
        ],
        structured_content=document,
        is_error=True,
    )


def _tool_result(result: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result))],
        structured_content=result,
    )


async def _no_stream(send: Send) -> None:
    """405 for the GET stream: the SDK's stateless transport would hold it open with nothing
    ever to send (the spec's answer for a server that offers no stream)."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": types.INVALID_REQUEST,
                "message": "Method Not Allowed: this connector keeps no sessions and offers no "
                "GET stream; send each request as a POST",
            },
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 405,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"allow", b"POST"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Connector:
    """The ASGI app mounted at the path of ``{mcp_url}``."""

    def __init__(
        self,
        settings: Settings,
        deps: SigningDeps,
        catalog: Catalog,
        *,
        resolver: CredentialResolver | None = None,
        outbound: Outbound | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.settings = settings
        self.budget = budget
        self.deps = deps
        self.catalog = catalog
        self.resolver = resolver or ApiKeyResolver(deps)
        self.mcp_url = settings.resolved_mcp_url
        self.portal_url = f"{settings.resolved_base_url}/portal"
        limits = OutboundLimits(
            allow_private=settings.connector_allow_private,
            max_response_bytes=settings.connector_max_response_bytes,
            timeout_seconds=settings.connector_timeout_seconds,
            max_redirects=settings.connector_max_redirects,
        )
        self.outbound = outbound or Outbound(limits)
        # The Bazaar index is the operator's own configuration: only the size and time limits.
        self.bazaar_outbound = Outbound(
            OutboundLimits(True, limits.max_response_bytes, limits.timeout_seconds, 0)
        )
        self.bus = InMemorySubscriptionBus()
        self.server = ConnectorServer(
            "paysign",
            version="0.1.0",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )
        self.stateless = settings.connector_stateless
        if not self.stateless:  # a stateless request's connection has no channel to notify on
            self.server.middleware.append(self._track_connection)
        self.manager = session_manager(self.server, settings)
        self.sessions = SessionLimits(self.manager, settings.connector_max_sessions_per_principal)
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._runner: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._seen_version: int | None = None

    # ---- lifecycle ----

    async def _ensure_started(self) -> None:
        if self._ready is None:
            self._ready, self._stop = asyncio.Event(), asyncio.Event()
            self._runner = asyncio.create_task(self._run(), name="paysign-connector")
        await self._ready.wait()

    async def _run(self) -> None:
        assert self._ready is not None and self._stop is not None
        try:
            self._seen_version = (await self._snapshot()).version
        except Exception:  # the database is away: the watcher reads the version when it is back
            log.exception("connector: catalog check failed")
        async with self.manager.run():
            self._ready.set()
            watcher = asyncio.create_task(self._watch_catalog())
            try:
                await self._stop.wait()
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

    async def close(self) -> None:
        if self._stop is not None and self._runner is not None:
            self._stop.set()
            await self._runner

    async def _snapshot(self) -> CatalogSnapshot:
        if self.deps.store.inline:
            return self.catalog.current()
        return await run_in_threadpool(self.catalog.current)

    async def _watch_catalog(self) -> None:
        while True:
            await asyncio.sleep(self.settings.connector_catalog_poll_seconds)
            try:
                await self.check_catalog()
            except Exception:  # a failed poll is retried at the next tick
                log.exception("connector: catalog check failed")

    async def check_catalog(self) -> bool:
        """Notify every client when the catalog version moved; ``True`` if it did."""
        version = (await self._snapshot()).version
        if version == self._seen_version:
            return False
        self._seen_version = version
        for connection in list(self._connections):
            try:
                await connection.send_tool_list_changed()
            except Exception:  # a closed connection
                self._connections.discard(connection)
        await self.bus.publish(ToolsListChanged())
        return True

    async def _track_connection(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        # `_connection` is private in mcp 2.3 (pinned; covered by the list_changed test).
        connection = getattr(ctx.session, "_connection", None)
        if isinstance(connection, Connection):
            self._connections.add(connection)
        return await call_next(ctx)

    # ---- HTTP ----

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        token = bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
        principal = await self.resolver.resolve(token) if token is not None else None
        if principal is None:
            session_id = headers.get(SESSION_HEADER, b"").decode("latin-1") or None
            await self.sessions.refused(session_id, token)
            await self._unauthorized(send, invalid=token is not None)
            return
        access = AccessToken(
            token=token or "",
            client_id=principal.client_id,
            scopes=[scope_of(self.mcp_url)],
            resource=self.mcp_url,
            subject=str(principal.account_id),
        )
        if self.stateless and scope["method"] == "GET":
            await _no_stream(send)
            return
        scope = {**scope, "user": AuthenticatedUser(access), PRINCIPAL_KEY: principal}
        await self._ensure_started()
        await self.sessions.handle(principal, token or "", scope, receive, send)

    async def _unauthorized(self, send: Send, *, invalid: bool) -> None:
        value = challenge(self.mcp_url, invalid=invalid).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(UNAUTHORIZED_BODY)).encode()),
                    (b"www-authenticate", value),
                ],
            }
        )
        await send({"type": "http.response.body", "body": UNAUTHORIZED_BODY})

    # ---- MCP handlers ----

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        snapshot = await self._snapshot()
        tools = [*catalog_tools(snapshot.listings), PAY_X402_TOOL, SEARCH_BAZAAR_TOOL]
        if self.budget is not None:
            tools.append(WALLET_STATUS_TOOL)
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        principal = self._principal(ctx)
        if principal is None:
            return _tool_error(
                ToolFailure("unauthorized", "No credential on this request.", "Reconnect.")
            )
        arguments = dict(params.arguments or {})
        try:
            return _tool_result(await self._dispatch(principal, params.name, arguments))
        except ToolFailure as failure:
            return _tool_error(failure)
        except OutboundRefused as refused:
            return _tool_error(
                ToolFailure(
                    f"outbound-{refused.reason}",
                    f"The connector did not complete the call: {refused.plain} "
                    "(outboundDetail says more).",
                    "Nothing was paid unless a payment was reported. Check the URL or try "
                    "another seller.",
                    outboundDetail=seller_text(refused.detail),
                )
            )

    def _principal(self, ctx: ServerRequestContext[Any, Any]) -> Principal | None:
        request = ctx.request
        scope = getattr(request, "scope", None)
        found = scope.get(PRINCIPAL_KEY) if isinstance(scope, dict) else None
        return found if isinstance(found, Principal) else None

    async def _dispatch(
        self, principal: Principal, name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        payer = principal.payer
        if name == SEARCH_BAZAAR:
            search = bazaar_search(arguments)
            return await search_bazaar(
                self.bazaar_outbound,
                self.settings.bazaar_url,
                query=search.query,
                network=search.network,
                max_price_base_units=search.max_price,
                limit=search.limit,
            )
        if name == WALLET_STATUS and self.budget is not None:
            return await wallet_status(self.budget, str(principal.account_id), arguments)
        snapshot = await self._snapshot()
        if name == PAY_X402:
            call = pay_x402_call(arguments, None)
            service_id = None
            with contextlib.suppress(ValueError):
                matched = snapshot.index.match(seller_location(call.url))
                service_id = matched.listing_id if matched is not None else None
            call = dataclasses.replace(call, service_id=service_id)
            return await pay(self.deps, self.outbound, payer, call, portal_url=self.portal_url)
        listing = next(
            (x for x in snapshot.listings if x.name == name and x.tier in TOOL_TIERS), None
        )
        if listing is None:
            raise ToolFailure(
                "unknown-tool",
                f"There is no tool {name!r} (the catalog may have changed).",
                "List the tools again and use one of them.",
            )
        call = listing_call(listing, arguments)
        return await pay(self.deps, self.outbound, payer, call, portal_url=self.portal_url)
