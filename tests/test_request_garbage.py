"""Requests leave no cyclic garbage: what one allocates is freed when it is answered, not left
to the garbage collector, whose pauses under load were the p99 (``server_start.py``)."""

from __future__ import annotations

import asyncio
import collections
import gc
import json
from types import FrameType

import pytest
from starlette.types import Message

from conftest import signature_body
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
            gc.collect()
            gc.disable()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                await rounds(10)
                gc.collect()
                return list(gc.garbage)
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()

    return asyncio.run(scenario()), dict(statuses)


def of_paysign(garbage: list[object]) -> list[object]:
    """The garbage's connected parts that hold a frame of paysign's code or an object of one
    of its types. The collector sees the whole test process: another thread (an earlier
    test's HTTP client) may drop a cycle of its own in the meantime."""
    by_id = {id(o): o for o in garbage}
    part = {i: i for i in by_id}

    def root(i: int) -> int:
        while part[i] != i:
            part[i] = part[part[i]]
            i = part[i]
        return i

    for o in garbage:
        for referent in gc.get_referents(o):
            if id(referent) in by_id:
                part[root(id(o))] = root(id(referent))
    parts: dict[int, list[object]] = collections.defaultdict(list)
    for i, o in by_id.items():
        parts[root(i)].append(o)
    return [o for members in parts.values() if any(map(_is_paysigns, members)) for o in members]


def _is_paysigns(o: object) -> bool:
    if isinstance(o, FrameType):
        return "/paysign/" in o.f_code.co_filename
    return type(o).__module__.startswith("paysign.")


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
    ],
    ids=["signed", "refused", "malformed", "unauthorized"],
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
    garbage = of_paysign(garbage)
    frames = collections.Counter(o.f_code.co_qualname for o in garbage if type(o) is FrameType)
    kinds = collections.Counter(type(o).__name__ for o in garbage)
    # What they are, not their values (a header holds the API key).
    assert not kinds, (kinds.most_common(8), frames.most_common(8))
