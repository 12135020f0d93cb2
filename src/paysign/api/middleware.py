"""One structured log event per request, a request id on every response, no 500 leaks.

Pure ASGI (no BaseHTTPMiddleware) because it sits on the hot path. It logs method, path,
status and duration only: never headers, bodies, keys or signatures.
"""

from __future__ import annotations

import os
import time
from typing import Any

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from paysign.http.problems import internal_error_response
from paysign.logging import REQUEST_EVENT
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
        started = time.perf_counter()
        status: dict[str, Any] = {"code": 500, "sent": False}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["sent"] = True
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (b"x-request-id", request_id.encode()),
                ]
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
            if not status["sent"]:
                response = internal_error_response(self.problem_base, exc)
                await response(scope, receive, send_with_id)
        finally:
            log.info(
                REQUEST_EVENT,
                request_id=request_id,
                method=scope.get("method"),
                path=scope.get("path"),
                status=status["code"],
                ms=round((time.perf_counter() - started) * 1000, 2),
            )
