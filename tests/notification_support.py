"""Real receivers for notifications: a webhook endpoint (HTTP on 127.0.0.1) that keeps what it
is sent and answers the statuses it is told to, and an SMTP server (aiosmtpd) that keeps the
messages it accepts."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from conftest import free_port


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class WebhookReceiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        #: Statuses to answer, in order; 204 once they are used up.
        self.statuses: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.received.append(Received(self.path, headers, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 204
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/paysign"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, seconds: float = 15.0) -> list[Received]:
        deadline = time.monotonic() + seconds
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.received)


class _Keep:
    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages

    async def handle_DATA(self, server: object, session: object, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


class SmtpSink:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.port = free_port()
        self.controller = Controller(_Keep(self.messages), hostname="127.0.0.1", port=self.port)
        self.url = f"smtp://127.0.0.1:{self.port}"

    def __enter__(self) -> SmtpSink:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()
