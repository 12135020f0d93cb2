"""The Starlette app, with a few hot endpoints dispatched before the router.

Starlette's router tries every route's regular expression in turn (dozens of them once the
portal, OAuth and connector are mounted), behind two exception middlewares: that cost more
than the signature itself on ``POST /wallets/signatures``. A direct route is an exact
``(method, path)`` lookup in a dict; anything else (another method, a trailing slash, a
``root_path``) falls through to the full app, so 404/405 answers are unchanged.

There is one middleware chain: what ``add_middleware`` adds wraps the direct routes and the
router alike (the request log, its request id and its 500 guard). Only Starlette's own
exception middlewares are the router's alone, so a direct endpoint must answer its expected
errors itself; an unexpected one reaches the middleware's 500 guard.

    app = DirectRoutingApp(routes=routes, exception_handlers=handlers)
    app.add_direct_route("POST", "/wallets/signatures", endpoint)
    app.add_middleware(RequestLogMiddleware, problem_base=problem_base)  # both paths
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

    def build_middleware_stack(self) -> ASGIApp:
        """The added middleware around a dispatcher that sends a direct route's requests to
        its endpoint and everything else to Starlette's own stack (error and exception
        middlewares, then the router)."""
        added, self.user_middleware = self.user_middleware, []
        try:
            routed = super().build_middleware_stack()
        finally:
            self.user_middleware = added
        app: ASGIApp = _DirectFirst(self._direct, routed)
        for cls, args, kwargs in reversed(added):
            app = cls(app, *args, **kwargs)
        return app


class _DirectFirst:
    __slots__ = ("direct", "routed")

    def __init__(self, direct: Mapping[tuple[str, str], ASGIApp], routed: ASGIApp) -> None:
        self.direct = direct
        self.routed = routed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            endpoint = self.direct.get((scope["method"], scope["path"]))
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await self.routed(scope, receive, send)
