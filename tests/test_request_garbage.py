"""Requests leave no cyclic garbage: what one allocates is freed when it is answered, not left
to the garbage collector, whose pauses under load were the p99 (``server_start.py``)."""

from __future__ import annotations

import asyncio
import collections
import json

import pytest
from starlette.types import Message

from conftest import signature_body
from garbage_support import described, of_paysign, unreachable_after
from paysign.app import create_app
from paysign.bootstrap import Runtime

DENIED_SELLER = "https://never-allowed.example.net/weather"


def request_scope(api_key: str, body: bytes) -> dict[str, object]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/wallets/signatures",
        "raw_path": b"/wallets/signatures",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {api_key}".encode()),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def garbage_of(runtime: Runtime, api_key: str, body: bytes, at_once: int) -> tuple[list, dict]:
    """The unreachable objects that ``at_once`` requests with ``body`` leave, ten times over,
    once the app is warm; and the statuses answered."""
    app = create_app(runtime)
    statuses: collections.Counter[int] = collections.Counter()

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses[message["status"]] += 1

    async def rounds(n: int) -> None:
        for _ in range(n):
            await asyncio.gather(
                *(app(request_scope(api_key, body), receive, send) for _ in range(at_once))
            )

    async def scenario() -> list[object]:
        async with app.router.lifespan_context(app):
            await rounds(3)
            with unreachable_after() as garbage:
                await rounds(10)
            return garbage

    return asyncio.run(scenario()), dict(statuses)


#: A key of the right shape that nobody issued.
UNISSUED_KEY = "psk_" + "x" * 43


@pytest.mark.parametrize("at_once", [1, 8], ids=["lone", "batched"])
@pytest.mark.parametrize(
    ("issued", "body", "status"),
    [
        (True, signature_body(), 200),
        (True, signature_body(seller_url=DENIED_SELLER), 403),
        (True, {"sellerUrl": "not a url"}, 422),
        (False, signature_body(), 401),
        (False, {"sellerUrl": "not a url"}, 401),
    ],
    ids=["signed", "refused", "malformed", "unauthorized", "unauthorized-malformed"],
)
def test_a_request_leaves_no_cyclic_garbage(
    runtime: Runtime,
    account: dict[str, str],
    issued: bool,
    body: object,
    status: int,
    at_once: int,
) -> None:
    api_key = account["api_key"] if issued else UNISSUED_KEY
    garbage, statuses = garbage_of(runtime, api_key, json.dumps(body).encode(), at_once)
    assert set(statuses) == {status}, statuses
    left = of_paysign(garbage)
    assert not left, described(left)
