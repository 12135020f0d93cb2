"""``POST /wallets/signatures`` as a plain ASGI handler: the path an agent waits on.

No Request/Response objects and no router: the ASGI scope is read directly, the body is
decoded with orjson once per distinct body (``services.request_bodies``), and with SQLite
the use case runs on the event loop (microseconds of in-process database work cost less than
a thread hop). Framework overhead, not the 25 µs signature, is what decides this endpoint's
speed; under load the signature is made beside the loop (``custody.signer_process``).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from paysign.errors import (
    MalformedRequest,
    NotAuthenticated,
    PaysignError,
    RequestTooLarge,
    UnsupportedMediaType,
)
from paysign.http.credentials import UNAUTHORIZED_BODY, call_store
from paysign.http.problems import problem_body
from paysign.metrics import observe_signing, signing_refused
from paysign.protocol import SignedPayment
from paysign.services.keys import bearer_token, looks_like_api_key
from paysign.services.signing import Completion, SigningDeps, SigningQueue, authenticate, by_api_key

_JSON = b"application/json"
_PROBLEM_JSON = b"application/problem+json"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def sandbox_requested(scope: Scope) -> bool:
    value = _header(scope, b"x-sandbox-mode")
    if value is None or value.strip().lower() == "false":
        return False
    if value.strip().lower() == "true":
        return True
    raise MalformedRequest("", "the X-Sandbox-Mode header must be 'true' or omitted")


async def read_json_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The body's bytes, once its type and size are right; decoding it is the signing
    service's (``services.request_bodies``), after the caller is authenticated."""
    content_type = _header(scope, b"content-type") or ""
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise UnsupportedMediaType("send the body as JSON with Content-Type: application/json")
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"the body may be at most {limit} bytes")
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            raise MalformedRequest("", "the request body was not received in full")
        body += bytes(message.get("body", b""))
        if len(body) > limit:
            raise RequestTooLarge(f"the body may be at most {limit} bytes")
        if not message.get("more_body", False):
            return body


def render(signed: SignedPayment) -> bytes:
    return orjson.dumps(
        {
            "paymentSignatureHeader": signed.header,
            "validAfter": signed.valid_after,
            "validBefore": signed.valid_before,
            "nonce": "0x" + signed.nonce.hex(),
        }
    )


async def respond(
    send: Send, status: int, body: bytes, content_type: bytes, extra: list[Any] | None = None
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})


class SignatureEndpoint:
    """The ASGI app for ``POST /wallets/signatures``; concurrent requests share transactions
    (``services.signing.SigningQueue``), and with a ``completion`` (``custody.signer_process``)
    their signatures are made beside the event loop."""

    def __init__(
        self,
        deps: SigningDeps,
        problem_base: str,
        max_body_bytes: int,
        *,
        completion: Completion | None = None,
    ) -> None:
        self.deps = deps
        self.problem_base = problem_base
        self.max_body_bytes = max_body_bytes
        self.queue = SigningQueue(deps, completion)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = perf_counter()
        try:
            await self._answer(scope, receive, send)
        finally:
            observe_signing(perf_counter() - started)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        deps = self.deps
        token = bearer_token(_header(scope, b"authorization"))
        try:
            if token is None or not looks_like_api_key(token):
                raise NotAuthenticated("Unauthorized")
            try:
                sandbox = sandbox_requested(scope)
                body = await read_json_body(scope, receive, self.max_body_bytes)
            except PaysignError:
                # An unauthenticated caller learns nothing from a 4xx: check the key first.
                await call_store(deps, authenticate, deps, token)
                raise
            signed = await self.queue.sign(by_api_key(token), body, sandbox=sandbox)
        except NotAuthenticated:
            # The one answer to every credential failure (spec 5.3): never says which one.
            await respond(send, 401, UNAUTHORIZED_BODY, _JSON, [(b"www-authenticate", b"Bearer")])
            signing_refused("unauthorized")
            return
        except PaysignError as exc:
            status, problem = problem_body(self.problem_base, exc)
            await respond(send, status, problem, _PROBLEM_JSON)
            if status < 500:
                signing_refused(exc.slug)
            return
        await respond(send, 200, render(signed), _JSON)
