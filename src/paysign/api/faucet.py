"""``POST /wallets/testnet/funds``: test USDC for the caller's wallet (spec 4.2)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from paysign.bootstrap import Runtime
from paysign.errors import FaucetRateLimited, NotAuthenticated, PaysignError
from paysign.http.credentials import call_store, unauthorized_response
from paysign.http.problems import error_response
from paysign.services.faucet import request_test_funds
from paysign.services.keys import bearer_token
from paysign.services.signing import SigningDeps, authenticate


def make_faucet_endpoint(runtime: Runtime, deps: SigningDeps, problem_base: str) -> Any:
    async def test_funds(request: Request) -> Response:
        try:
            holder = await call_store(
                deps, authenticate, deps, bearer_token(request.headers.get("authorization"))
            )
            grant = await run_in_threadpool(
                request_test_funds,
                runtime.db,
                runtime.clock,
                runtime.sandbox_chain,
                holder,
                amount=runtime.settings.test_funds_amount,
            )
        except NotAuthenticated:
            return unauthorized_response()
        except PaysignError as exc:
            headers = {}
            if isinstance(exc, FaucetRateLimited):
                headers["Retry-After"] = str(exc.retry_after)
            return error_response(problem_base, exc, headers=headers)
        payload = {
            "transactionHash": grant.transaction_hash,
            "network": grant.network,
            "token": grant.token,
        }
        return Response(orjson.dumps(payload), media_type="application/json")

    return test_funds
