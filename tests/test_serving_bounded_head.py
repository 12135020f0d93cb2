"""``serving/bounded_head.py``: a request's head (request line and headers) is read up to
64 KiB, over a real socket. Unbounded, a 300 MB header sent with no credential was held whole
in the server's memory."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from starlette.types import Receive, Scope, Send

from conftest import LiveServer
from paysign.serving.bounded_head import MAX_HEAD_BYTES


async def _echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers with how many body bytes it read."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = str(size).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with LiveServer(_echo_length) as live:  # type: ignore[arg-type]
        yield live


def _connect(server: LiveServer) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return connection


def _answer(connection: socket.socket) -> bytes:
    """One response (its head and a body of content-length bytes), or what came before the
    connection closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return head + b"\r\n\r\n" + body


def _request(headers: bytes = b"", body: bytes = b"") -> bytes:
    return (
        b"POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        + headers
        + b"content-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def test_a_head_over_the_limit_is_refused_and_the_connection_closed(server: LiveServer) -> None:
    with _connect(server) as connection:
        connection.sendall(b"GET /x HTTP/1.1\r\nhost: 127.0.0.1\r\nx-long: ")
        sent = 0
        try:
            while sent < 4 * MAX_HEAD_BYTES:  # sent in pieces, as a slow client would
                connection.sendall(b"a" * 8192)
                sent += 8192
        except OSError:
            pass  # the server closed the connection while we were still sending
        answer = _answer(connection)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:80]
        assert connection.recv(1) == b""  # closed
    with _connect(server) as connection:  # the server goes on serving
        connection.sendall(_request())
        assert _answer(connection).startswith(b"HTTP/1.1 200 ")


def test_a_long_head_within_the_limit_and_a_large_body_are_served(server: LiveServer) -> None:
    long_header = b"x-long: " + b"a" * (MAX_HEAD_BYTES - 1024) + b"\r\n"
    body = b"b" * (4 * MAX_HEAD_BYTES)
    with _connect(server) as connection:
        connection.sendall(_request(long_header))
        assert _answer(connection).startswith(b"HTTP/1.1 200 ")
        connection.sendall(_request(body=body))  # a body is not a head
        answer = _answer(connection)
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(str(len(body)).encode())


def test_heads_on_one_kept_alive_connection_are_counted_each_alone(server: LiveServer) -> None:
    header = b"x-some: " + b"a" * 2000 + b"\r\n"
    with _connect(server) as connection:
        for _ in range(3 * MAX_HEAD_BYTES // len(header)):
            connection.sendall(_request(header))
            assert _answer(connection).startswith(b"HTTP/1.1 200 ")
