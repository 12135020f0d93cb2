"""``GET /wallets/status``: what the API key's holder can still spend (``services/budget.py``).

``?seller=`` (a URL or ``host/path``) also says whether that seller waits for the holder's
approval; one the source policy cannot judge never does (it is refused outright). The sandbox
balance is asked of the chain, so the whole read runs off the event loop."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from paysign.errors import NotAuthenticated, PaysignError
from paysign.http.credentials import call_store, unauthorized_response
from paysign.http.problems import error_response, problem_response
from paysign.services.budget import Budget
from paysign.services.keys import bearer_token
from paysign.services.signing import SigningDeps, authenticate

SELLER = "seller"


def make_wallet_status_endpoint(budget: Budget, deps: SigningDeps, problem_base: str) -> Any:
    async def wallet_status(request: Request) -> Response:
        try:
            holder = await call_store(
                deps, authenticate, deps, bearer_token(request.headers.get("authorization"))
            )
        except NotAuthenticated:
            return unauthorized_response()
        query = request.query_params
        unknown = next((k for k in query if k != SELLER), None)
        if unknown is not None or len(query.getlist(SELLER)) > 1:
            return problem_response(
                problem_base,
                "malformed-request",
                f"the query takes one parameter, {SELLER!r} once; {unknown or SELLER!r} is "
                "not expected",
                pointer=f"?{unknown or SELLER}",
            )
        seller = query.get(SELLER)
        try:
            status = await run_in_threadpool(budget.status, holder.account_id, seller=seller)
        except PaysignError as exc:
            return error_response(problem_base, exc)
        return Response(orjson.dumps(status.document()), media_type="application/json")

    return wallet_status
