"""Small read-only endpoints: health, readiness, problem pages, the OpenAPI document."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

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


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} — paysign</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;
color:#1b1f24}}code{{background:#f2f4f7;padding:0 .25em;border-radius:3px}}
.status{{color:#57606a}}</style></head>
<body><p class="status">paysign problem type · HTTP {status}</p><h1>{title}</h1>
<h2>What happened</h2><p>{explanation}</p><h2>What to do</h2><p>{remedy}</p>
<p class="status">{retry}</p></body></html>"""


def make_problem_page(problem_base: str) -> Any:
    async def problem_page(request: Request) -> Response:
        kind = PROBLEM_TYPES.get(request.path_params["slug"])
        if kind is None:
            return problem_response(problem_base, "not-found", "no such problem type")
        retry = (
            "Retrying the same request may succeed."
            if kind.retryable
            else "Retrying the same request unchanged will not help."
        )
        return HTMLResponse(
            _PAGE.format(
                title=html.escape(kind.title),
                status=kind.status,
                explanation=html.escape(kind.explanation),
                remedy=html.escape(kind.remedy),
                retry=retry,
            )
        )

    return problem_page
