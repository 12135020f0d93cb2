"""Small read-only endpoints: health, readiness, problem pages, the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.http.problem_pages import problem_page_html
from paysign.http.problems import PROBLEM_TYPES, UNAVAILABLE_HEADERS, problem_response


def json_response(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


def make_readyz(probe: Callable[[], bool]) -> Any:
    async def readyz(request: Request) -> Response:
        ok = await run_in_threadpool(probe)
        if ok:
            return json_response({"status": "ok"})
        # As every answer while the database is away: 503 with Retry-After.
        response = json_response({"status": "unavailable"}, 503)
        response.headers.update(UNAVAILABLE_HEADERS)
        return response

    return readyz


def make_problem_page(problem_base: str, portal_url: str) -> Any:
    async def problem_page(request: Request) -> Response:
        kind = PROBLEM_TYPES.get(request.path_params["slug"])
        if kind is None:
            return problem_response(problem_base, "not-found", "no such problem type")
        return HTMLResponse(problem_page_html(kind, portal_url))

    return problem_page
