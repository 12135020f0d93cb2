"""``POST /wallets/signatures``: authenticate, read the body, call the use case, render.

Kept deliberately lean (raw body, orjson, one thread hop for all database work): this is the
path an agent waits on, and framework overhead dominates the 25 µs of the signature itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from paysign.api.problems import error_response, problem_response
from paysign.errors import (
    MalformedRequest,
    NotAuthenticated,
    PaysignError,
    RequestTooLarge,
    UnsupportedMediaType,
)
from paysign.protocol import SignedPayment
from paysign.services.keys import bearer_token
from paysign.services.signing import SigningDeps, authenticate, sign_payment

T = TypeVar("T")

UNAUTHORIZED_BODY = b'{"message":"Unauthorized"}'


def unauthorized() -> Response:
    """The one answer to every credential failure (spec 5.3): it never says which one."""
    return Response(
        UNAUTHORIZED_BODY,
        status_code=401,
        media_type="application/json",
        headers={"WWW-Authenticate": "Bearer"},
    )


def sandbox_requested(request: Request) -> bool:
    value = request.headers.get("x-sandbox-mode")
    if value is None or value.strip().lower() == "false":
        return False
    if value.strip().lower() == "true":
        return True
    raise MalformedRequest("", "the X-Sandbox-Mode header must be 'true' or omitted")


async def read_json_body(request: Request, limit: int) -> Any:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise UnsupportedMediaType("send the body as JSON with Content-Type: application/json")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"the body may be at most {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"the body may be at most {limit} bytes")
        chunks.append(chunk)
    try:
        return orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as exc:
        raise MalformedRequest("", f"the body is not valid JSON ({exc.msg})") from None


def render(signed: SignedPayment) -> bytes:
    return orjson.dumps(
        {
            "paymentSignatureHeader": signed.header,
            "validAfter": signed.valid_after,
            "validBefore": signed.valid_before,
            "nonce": "0x" + signed.nonce.hex(),
        }
    )


def make_endpoint(deps: SigningDeps, problem_base: str, max_body_bytes: int) -> Any:
    async def call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # In-process SQLite answers in microseconds: calling it on the loop beats a thread hop.
        if deps.store.inline:
            return function(*args, **kwargs)
        return await run_in_threadpool(function, *args, **kwargs)

    async def create_signature(request: Request) -> Response:
        token = bearer_token(request.headers.get("authorization"))
        if token is None:
            return unauthorized()
        try:
            try:
                sandbox = sandbox_requested(request)
                body = await read_json_body(request, max_body_bytes)
            except PaysignError:
                # An unauthenticated caller learns nothing from a 4xx: check the key first.
                await call(authenticate, deps, token)
                raise
            signed = await call(sign_payment, deps, token, body, sandbox=sandbox)
        except NotAuthenticated:
            return unauthorized()
        except PaysignError as exc:
            return error_response(problem_base, exc)
        return Response(render(signed), media_type="application/json")

    return create_signature


__all__ = ["make_endpoint", "problem_response", "unauthorized"]
