"""The Starlette app, with a few hot endpoints dispatched before the router.

Starlette's router tries every route's regular expression in turn (dozens of them once the
portal, OAuth and connector are mounted), behind two exception middlewares: that cost more
than the signature itself on ``POST /wallets/signatures``. A direct route is an exact
``(method, path)`` lookup in a dict; anything else (another method, a trailing slash, a
``root_path``) falls through to the full app, so 404/405 answers are unchanged.

A direct endpoint must be a complete ASGI app on its own: it is wrapped in the same
request-log middleware as the rest (request id, one log event, no 500 leaks), but no
Starlette exception handler runs for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send


class DirectRoutingApp(Starlette):
    def __init__(
        self, *, routes: Sequence[BaseRoute], exception_handlers: Mapping[Any, Any]
    ) -> None:
        super().__init__(routes=routes, exception_handlers=exception_handlers)
        self._direct: dict[tuple[str, str], ASGIApp] = {}

    def add_direct_route(self, method: str, path: str, app: ASGIApp) -> None:
        self._direct[(method, path)] = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            direct = self._direct.get((scope["method"], scope["path"]))
            if direct is not None:
                await direct(scope, receive, send)
                return
        await super().__call__(scope, receive, send)
