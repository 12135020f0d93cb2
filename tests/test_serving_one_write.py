"""``serving/one_write.py``: a response of known length goes out in one write, and every
response's bytes are the ones uvicorn's own protocol writes.

Each case is run through ``OneWriteProtocol`` and through uvicorn's ``HttpToolsProtocol`` on a
transport that records its writes; the served bytes are compared, then how they were cut.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from paysign.serving.one_write import OneWriteProtocol

App = Callable[[Scope, Receive, Send], Awaitable[None]]
BODY = b'{"paymentSignatureHeader":"' + b"A" * 400 + b'"}'


class RecordingTransport(asyncio.Transport):
    """A connection's transport that keeps each write, as the socket would have seen them."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def connected(protocol_class: type[HttpToolsProtocol], app: App) -> HttpToolsProtocol:
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False)
    config.load()
    return protocol_class(config=config, server_state=ServerState(), app_state={})  # type: ignore[arg-type]


async def served(
    protocol_class: type[HttpToolsProtocol],
    app: App,
    request: bytes,
    *,
    more: bytes = b"",
    transport: RecordingTransport | None = None,
) -> RecordingTransport:
    """``request`` sent to ``app`` over one connection (``more`` once the app has started);
    the transport once the app has returned."""
    protocol = connected(protocol_class, app)
    transport = transport or RecordingTransport()
    protocol.connection_made(transport)
    protocol.data_received(request)
    await asyncio.sleep(0)
    if more:
        protocol.data_received(more)
    await asyncio.wait_for(asyncio.gather(*protocol.tasks), 5)
    protocol.connection_lost(None)
    return transport


async def both(app: App, request: bytes, **kw: bytes) -> tuple[list[bytes], list[bytes]]:
    """The writes of uvicorn's protocol, then of ours, for the same exchange."""
    stock = await served(HttpToolsProtocol, app, request, **kw)
    ours = await served(OneWriteProtocol, app, request, **kw)
    assert b"".join(ours.writes) == b"".join(stock.writes)
    assert ours.closed == stock.closed
    return stock.writes, ours.writes


def response(body: bytes, *, status: int = 200) -> App:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def post(body: bytes = b"{}", *, extra: bytes = b"") -> bytes:
    return (
        b"POST /wallets/signatures HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s"
        % (len(body), extra, body)
    )


def test_a_response_of_known_length_is_one_write_of_uvicorns_bytes() -> None:
    stock, ours = asyncio.run(both(response(BODY), post()))
    assert len(stock) == 2  # the head, then the body
    assert ours == [stock[0] + stock[1]]
    assert ours[0].startswith(b"HTTP/1.1 200 OK\r\n") and ours[0].endswith(BODY)


def test_every_response_on_a_keep_alive_connection_is_one_write() -> None:
    stock, ours = asyncio.run(both(response(BODY), post() + post()))
    assert len(stock) == 4
    assert ours == [stock[0] + stock[1], stock[2] + stock[3]]


def test_a_body_in_pieces_has_the_head_with_its_first_piece_only() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        headers = [(b"content-length", b"%d" % (2 * len(BODY)))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": BODY, "more_body": True})
        await send({"type": "http.response.body", "body": BODY})

    stock, ours = asyncio.run(both(app, post()))
    assert ours == [stock[0] + stock[1], stock[2]]


def test_a_streamed_response_has_its_head_sent_before_its_first_event() -> None:
    """The connector's event streams: the head must not wait for an event that may be long in
    coming."""
    transport = RecordingTransport()
    written_before_event: list[list[bytes]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        written_before_event.append(list(transport.writes))
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    asyncio.run(served(OneWriteProtocol, app, post(), transport=transport))
    [head] = written_before_event[0]
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"transfer-encoding: chunked" in head
    assert transport.writes[0] == head


@pytest.mark.parametrize(
    ("app", "request_bytes"),
    [
        (response(BODY), post().replace(b"POST", b"HEAD", 1)),  # a head and no body
        (response(b"", status=204), post()),  # no body to wait for
    ],
    ids=["HEAD", "empty body"],
)
def test_a_response_with_no_body_to_write_still_has_its_head_written(
    app: App, request_bytes: bytes
) -> None:
    stock, ours = asyncio.run(both(app, request_bytes))
    assert ours == stock
    assert ours[0].startswith(b"HTTP/1.1 20")


def test_100_continue_is_written_before_the_body_is_sent_and_the_answer_is_one_write() -> None:
    async def scenario() -> tuple[list[bytes], list[bytes]]:
        body = b'{"a": 1}'
        request = post(body, extra=b"expect: 100-continue\r\n")
        head_only = request[: -len(body)]
        return await both(response(BODY), head_only, more=body)

    stock, ours = asyncio.run(scenario())
    assert stock[0] == ours[0] == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert ours[1:] == [stock[1] + stock[2]]


def test_a_response_abandoned_after_its_head_has_the_head_written_before_the_close() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        headers = [(b"content-length", b"%d" % len(BODY))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        raise RuntimeError("the app failed after starting its answer")

    stock, ours = asyncio.run(both(app, post()))
    assert ours == stock  # the head alone, then the close (checked in both())
    assert ours[0].startswith(b"HTTP/1.1 200 OK\r\n")


def test_a_failing_app_gets_uvicorns_500_in_one_write() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("the app failed before answering")

    stock, ours = asyncio.run(both(app, post()))
    assert ours == [b"".join(stock)]
    assert ours[0].startswith(b"HTTP/1.1 500 Internal Server Error\r\n")


def test_a_disconnected_client_gets_nothing_more() -> None:
    async def scenario() -> RecordingTransport:
        started = asyncio.Event()
        release = asyncio.Event()

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            await receive()
            headers = [(b"content-length", b"%d" % len(BODY))]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            started.set()
            await release.wait()
            await send({"type": "http.response.body", "body": BODY})

        protocol = connected(OneWriteProtocol, app)
        transport = RecordingTransport()
        protocol.connection_made(transport)
        protocol.data_received(post())
        await asyncio.wait_for(started.wait(), 5)
        protocol.connection_lost(ConnectionResetError())
        release.set()
        await asyncio.wait_for(asyncio.gather(*protocol.tasks), 5)
        return transport

    transport = asyncio.run(scenario())
    assert transport.writes == []  # the held head went with the connection


@pytest.mark.parametrize("protocol_class", [HttpToolsProtocol, OneWriteProtocol])
def test_an_answered_request_is_freed_without_the_garbage_collector(
    protocol_class: type[HttpToolsProtocol],
) -> None:
    """A reference cycle per request left each one's objects to the collector, whose pauses
    were the p99 under load (3 ms became 10)."""
    answered: list[weakref.ref[object]] = []

    class Watched(protocol_class):  # type: ignore[valid-type, misc]
        def on_response_complete(self) -> None:
            answered.append(weakref.ref(self.cycle))
            super().on_response_complete()

    gc.collect()
    gc.disable()
    try:
        asyncio.run(served(Watched, response(BODY), post() + post() + post()))
        assert len(answered) == 3
        assert [ref() is None for ref in answered] == [True, True, True]
    finally:
        gc.enable()
