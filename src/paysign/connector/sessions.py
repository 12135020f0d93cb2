"""The SDK's session manager, and how many of its sessions one principal may hold.

The SDK caps the sessions of the whole process (``max_sessions``) and nothing per caller, so
one credential opening sessions in a loop would leave every other holder a ``503`` until its
sessions went idle. Here each principal (the credential and the account it acts for, the pair
the SDK binds a session to) holds at most ``connector_max_sessions_per_principal``; opening one
more closes that principal's least recently used session. Closing rather than refusing: an
assistant that restarts without ending its session leaves it behind, and after a few restarts
a refusal would lock its holder out for the idle timeout, while closing only ever ends the
caller's own sessions. A session's next request with an API key that is refused (revoked,
expired, its account disabled) closes every session that key used, so a revoked key does not
keep its slots until they go idle. An OAuth access token is refused routinely once it expires,
and its client refreshes it and carries on in the same session, so its refusal closes nothing:
the limit and the idle timeout bound what a revoked grant leaves behind.

The manager keeps its sessions in private members (``_server_instances``, ``_discard_session``:
``mcp`` is pinned, and ``tests/connector/test_session_limits.py`` covers them).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
from mcp.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from paysign.config import Settings
from paysign.http.credentials import Principal
from paysign.services.keys import looks_like_api_key

log = logging.getLogger(__name__)

SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")
VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode("latin-1")
#: Only while the principal's other sessions are all still being opened (nothing to close).
BUSY_RETRY_AFTER_SECONDS = 1


def _hosts_and_origins(settings: Settings) -> tuple[list[str], list[str]]:
    hosts = ["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    for url in (settings.resolved_mcp_url, settings.resolved_base_url):
        parts = urlsplit(url)
        hosts.append(parts.netloc)
        origins.append(f"{parts.scheme}://{parts.netloc}")
    hosts += [h.strip() for h in settings.connector_allowed_hosts.split(",") if h.strip()]
    origins += [o.strip() for o in settings.connector_allowed_origins.split(",") if o.strip()]
    return list(dict.fromkeys(hosts)), list(dict.fromkeys(origins))


def session_manager(server: Server[Any], settings: Settings) -> StreamableHTTPSessionManager:
    hosts, origins = _hosts_and_origins(settings)
    return StreamableHTTPSessionManager(
        app=server,
        stateless=settings.connector_stateless,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=origins,
        ),
    )


def _token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


def _opens_session(scope: Scope) -> bool:
    """Whether this request may open a stateful session: a POST without a session id, in the
    handshake era (a later protocol version is stateless and never holds one). The SDK refuses
    any other request without a session id at once."""
    version = _header(scope, VERSION_HEADER)
    in_handshake_era = version is None or version in HANDSHAKE_PROTOCOL_VERSIONS
    no_session = _header(scope, SESSION_HEADER) is None
    return scope["method"] == "POST" and in_handshake_era and no_session


async def _busy(send: Send) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": types.INVALID_REQUEST,
                "message": "Too many sessions are being opened with this credential at once; "
                "retry shortly",
            },
        }
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(BUSY_RETRY_AFTER_SECONDS).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class SessionLimits:
    """The sessions each principal holds, least recently used first, and the digest of the
    token that last used each (to recognise it once that token is refused)."""

    def __init__(self, manager: StreamableHTTPSessionManager, per_principal: int) -> None:
        self.manager = manager
        self.per_principal = per_principal
        self._held: dict[tuple[str, str], OrderedDict[str, bytes]] = {}
        self._opening: dict[tuple[str, str], int] = {}

    @staticmethod
    def _key(principal: Principal) -> tuple[str, str]:
        return principal.client_id, str(principal.account_id)

    def _live(self, key: tuple[str, str]) -> OrderedDict[str, bytes]:
        # Sessions the SDK ended on its own (idle, DELETE, a crash) are forgotten here.
        held = self._held.get(key, OrderedDict())
        for session_id in [s for s in held if s not in self.manager._server_instances]:
            del held[session_id]
        if not held and not self._opening.get(key):
            self._held.pop(key, None)
        return held

    async def handle(
        self, principal: Principal, token: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serve an authenticated request through the manager, within the principal's limit."""
        if self.manager.stateless or not _opens_session(scope):
            self._touch(principal, _header(scope, SESSION_HEADER), token)
            await self.manager.handle_request(scope, receive, send)
            return
        key = self._key(principal)
        held = self._live(key)
        opening = self._opening.get(key, 0)
        surplus = len(held) + opening + 1 - self.per_principal
        if surplus > len(held):
            await _busy(send)
            return
        victims = list(held)[: max(surplus, 0)]
        for session_id in victims:
            del held[session_id]
        self._opening[key] = opening + 1
        self._held[key] = held
        opened: list[str] = []
        try:
            for session_id in victims:
                await self._close(session_id)
            await self.manager.handle_request(scope, receive, self._watch(send, opened.append))
        finally:
            self._opening[key] -= 1
            if not self._opening[key]:
                del self._opening[key]
            if opened and opened[0] in self.manager._server_instances:
                held[opened[0]] = _token_digest(token)
            self._live(key)

    def _touch(self, principal: Principal, session_id: str | None, token: str) -> None:
        held = self._held.get(self._key(principal))
        if session_id is not None and held is not None and session_id in held:
            held[session_id] = _token_digest(token)  # an OAuth token is refreshed
            held.move_to_end(session_id)

    async def refused(self, session_id: str | None, token: str | None) -> None:
        """A request whose API key is refused: if it names a session that this very key used,
        close every session the key used. Another credential cannot close a session."""
        if session_id is None or token is None or not looks_like_api_key(token):
            return
        digest = _token_digest(token)
        for key, held in list(self._held.items()):
            if held.get(session_id) != digest:
                continue
            for victim in [s for s, d in held.items() if d == digest]:
                del held[victim]
                await self._close(victim)
            self._live(key)
            return

    async def _close(self, session_id: str) -> None:
        transport = self.manager._server_instances.get(session_id)
        if transport is not None:
            log.info("connector: closing session %s", session_id[:8])
            await self.manager._discard_session(session_id, transport)

    @staticmethod
    def _watch(send: Send, opened: Callable[[str], None]) -> Send:
        """``send``, noting the session id of an answer that opened a session."""

        async def watching(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", []):
                    if name.lower() == SESSION_HEADER:
                        opened(value.decode("latin-1"))
            await send(message)

        return watching
