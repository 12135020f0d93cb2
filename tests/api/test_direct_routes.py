"""The direct routes (api/direct.py) and the router share one middleware chain: what
``add_middleware`` adds sees the hot route too, and an unexpected error on either path is the
same problem document with a request id — over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from conftest import LiveServer
from paysign.api.direct import DirectRoutingApp
from paysign.api.middleware import RequestLogMiddleware
from paysign.http.problems import problem_response

PROBLEMS = "https://paysign.test/problems"


class Seen:
    """A middleware that notes every request it wraps."""

    paths: list[str] = []

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            Seen.paths.append(f"{scope['method']} {scope['path']}")
        await self.app(scope, receive, send)


async def fast(scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse({"direct": True})(scope, receive, send)


async def fast_and_broken(scope: Scope, receive: Receive, send: Send) -> None:
    raise RuntimeError("a bug on the hot path")


async def routed(request: Request) -> Response:
    return JSONResponse({"direct": False})


async def routed_and_broken(request: Request) -> Response:
    raise RuntimeError("a bug behind the router")


async def internal_error(request: Request, exc: Exception) -> Response:
    return problem_response(PROBLEMS, "internal-error", "the request failed inside paysign")


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    Seen.paths = []
    app = DirectRoutingApp(
        routes=[
            Route("/fast", routed, methods=["POST"]),
            Route("/routed", routed, methods=["GET"]),
            Route("/broken", routed_and_broken, methods=["GET"]),
        ],
        exception_handlers={Exception: internal_error},
    )
    app.add_direct_route("POST", "/fast", fast)
    app.add_direct_route("POST", "/fast-broken", fast_and_broken)
    app.add_middleware(Seen)
    app.add_middleware(RequestLogMiddleware, problem_base=PROBLEMS)
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        yield client


def test_added_middleware_wraps_the_direct_route_and_the_router(http) -> None:
    assert http.post("/fast").json() == {"direct": True}
    assert http.get("/routed").json() == {"direct": False}
    assert http.get("/fast").status_code == 405  # another method: the router's answer
    assert Seen.paths == ["POST /fast", "GET /routed", "GET /fast"]


@pytest.mark.parametrize(("method", "path"), [("POST", "/fast-broken"), ("GET", "/broken")])
def test_an_unexpected_error_is_a_problem_document_on_either_path(http, method, path) -> None:
    answer = http.request(method, path)
    assert answer.status_code == 500
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["type"] == f"{PROBLEMS}/internal-error"
    assert "bug" not in answer.text  # the exception stays in the log
    assert len(answer.headers["x-request-id"]) == 16
