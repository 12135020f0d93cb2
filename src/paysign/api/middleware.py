"""One structured log event per request, a request id on every response, no 500 leaks.

Pure ASGI (no BaseHTTPMiddleware) because it sits on the hot path. It logs method, path,
status and duration only: never headers, bodies, keys or signatures.
"""

from __future__ import annotations

import os
import time

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from paysign.http.problems import internal_error_response
from paysign.logging import log_request
from paysign.services.availability import database_unavailable

log = structlog.get_logger("paysign.http")


class RequestLogMiddleware:
    def __init__(self, app: ASGIApp, problem_base: str) -> None:
        self.app = app
        self.problem_base = problem_base

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = os.urandom(8).hex()
        id_header = (b"x-request-id", request_id.encode())
        started = time.perf_counter()
        status = 500
        sent = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
                sent = True
                message["headers"] = [*message.get("headers", ()), id_header]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if database_unavailable(exc):  # answered 503: a condition, not a bug
                log.warning(
                    "database_unavailable",
                    request_id=request_id,
                    path=scope.get("path"),
                    error_type=type(exc).__name__,
                    error=str(exc),
                )
            else:
                log.exception("unhandled_error", request_id=request_id, path=scope.get("path"))
            if not sent:
                response = internal_error_response(self.problem_base, exc)
                await response(scope, receive, send_with_id)
        finally:
            ms = round((time.perf_counter() - started) * 1000, 2)
            log_request(request_id, scope.get("method"), scope.get("path"), status, ms)
