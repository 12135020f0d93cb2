"""Real receivers for notifications: a webhook endpoint (HTTP on 127.0.0.1) that keeps what it
is sent and answers the statuses it is told to, and an SMTP server (aiosmtpd) that keeps the
messages it accepts, their envelope recipients and, when it offers AUTH without TLS (as a
server whose STARTTLS an attacker stripped does), the credentials it was sent."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from conftest import free_port
from paysign.background import guarded_webhook_poster
from paysign.bootstrap import Runtime
from paysign.services.notification_delivery import Notifier, SmtpSettings


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
    def __init__(self, messages: list[Message], recipients: list[list[str]]) -> None:
        self.messages = messages
        self.recipients = recipients

    async def handle_DATA(self, server: object, session: object, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"


class SmtpSink:
    """``offer_auth_in_clear``: AUTH offered without STARTTLS, every login accepted and kept in
    ``logins``."""

    def __init__(self, *, offer_auth_in_clear: bool = False) -> None:
        self.messages: list[Message] = []
        #: Each accepted message's envelope recipients (RCPT TO), in order.
        self.recipients: list[list[str]] = []
        self.logins: list[tuple[str, str]] = []
        self.port = free_port()
        auth: dict[str, Any] = {}
        if offer_auth_in_clear:
            auth = {"auth_require_tls": False, "authenticator": self._keep_login}
        self.controller = Controller(
            _Keep(self.messages, self.recipients), hostname="127.0.0.1", port=self.port, **auth
        )
        self.url = f"smtp://127.0.0.1:{self.port}"

    def _keep_login(self, *args: Any) -> AuthResult:
        credentials = args[-1]
        if isinstance(credentials, LoginPassword):
            self.logins.append((credentials.login.decode(), credentials.password.decode()))
        return AuthResult(success=True)

    def __enter__(self) -> SmtpSink:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()


def notifier(runtime: Runtime, *, allow_private: bool = True, smtp: str | None = None) -> Notifier:
    """The delivery job of ``runtime``: webhooks to private addresses allowed (the receivers
    here are local), e-mail through ``smtp`` when given."""
    return Notifier(
        runtime.db,
        runtime.vault,
        runtime.clock,
        post_webhook=guarded_webhook_poster(allow_private=allow_private),
        smtp=None if smtp is None else SmtpSettings(smtp, "paysign@example.org"),
    )
