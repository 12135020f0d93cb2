"""Sending the notification outbox: each event to each of the account's targets, a webhook
signed per Standard Webhooks (through the connector's outbound address guard) or an email
through SMTP, retried with backoff, every attempt recorded on the delivery.

Run by the background job of ``background.py`` in the holder of its lease."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import smtplib
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

import structlog
from sqlalchemy.engine import Connection

from paysign.clock import Clock
from paysign.custody.vault import KeyVault, SealedSecret
from paysign.policy.caps import iso
from paysign.protocol.usdc import format_usdc
from paysign.services.notifications import is_plain_address, webhook_context
from paysign.store import notification_repo
from paysign.store.activity_outbound import scrubbed
from paysign.store.database import Database
from paysign.store.notification_repo import KEY_EXPIRING, Delivery

log = structlog.get_logger("paysign.notifications")

#: Seconds to wait before each retry; a delivery that fails once more after the last is failed.
RETRY_DELAYS = (10, 60, 300, 1800, 7200, 21600)
WEBHOOK_TIMEOUT_SECONDS = 10.0
WEBHOOK_MAX_RESPONSE_BYTES = 64 * 1024
#: A holder is told this long before their API key expires; the keys are looked at this often.
KEY_EXPIRY_NOTICE_SECONDS = 3 * 24 * 3600
KEY_CHECK_INTERVAL_SECONDS = 60
#: The longest delivery error kept (the column's size).
MAX_ERROR_LENGTH = 500


class WebhookUnreachable(Exception):
    """The webhook was not called or did not answer (an address the outbound guard refuses,
    a network failure, a timeout); the message says which, for the holder to read."""


#: POSTs ``body`` with ``headers`` to ``url`` and returns the HTTP status, or raises
#: ``WebhookUnreachable``. The wiring supplies it (``background.guarded_webhook_poster``):
#: the connector's outbound client, with its address guard.
PostWebhook = Callable[[str, dict[str, str], bytes], Awaitable[int]]

_SUBJECTS = {
    "allow-pending": "A seller is waiting for your approval",
    "spend-cap-exceeded": "A spend cap refused a payment",
    "test": "Test notification",
    KEY_EXPIRING: "Your API key expires soon",
}


def sign_webhook(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: ``v1,`` and the base64 HMAC-SHA256, keyed with the
    secret's bytes, of ``id.timestamp.body``."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def event_type(event: str) -> str:
    named = {"test": "notification.test", KEY_EXPIRING: "key.expiring"}
    return named.get(event, f"payment.{event}")


def payload(delivery: Delivery) -> dict[str, object]:
    event = delivery.event
    data: dict[str, object] = {"accountId": event.account_id, "detail": event.detail}
    if event.seller_host:
        data.update(
            seller=f"{event.seller_host}{event.seller_path}",
            sellerHost=event.seller_host,
            sellerPath=event.seller_path,
            amount=event.amount,
            refusedAt=iso(event.created_at),
        )
    return {"type": event_type(event.event), "timestamp": iso(event.created_at), "data": data}


class StartTlsMissing(smtplib.SMTPException):
    """The smtp:// server did not offer STARTTLS, so its credentials were not sent."""


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    """``url``: ``smtp://[user:password@]host[:port]`` (STARTTLS when the server offers it,
    and required before a user name and password are sent), or ``smtps://`` (TLS from the
    start)."""

    url: str
    sender: str

    def send(self, message: EmailMessage, recipient: str, timeout: float = 20.0) -> None:
        """Send ``message`` to ``recipient`` alone, whatever its headers say."""
        parts = urlsplit(self.url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("the SMTP URL is smtp://host[:port] or smtps://host[:port]")
        client: smtplib.SMTP
        if parts.scheme == "smtps":
            client = smtplib.SMTP_SSL(
                parts.hostname,
                parts.port or 465,
                timeout=timeout,
                context=ssl.create_default_context(),
            )
        else:
            client = smtplib.SMTP(parts.hostname, parts.port or 25, timeout=timeout)
        with client:
            if parts.scheme == "smtp":
                client.ehlo()
                if client.has_extn("starttls"):
                    client.starttls(context=ssl.create_default_context())
                    client.ehlo()
                elif parts.username:
                    # Anyone on the path can strip STARTTLS from the server's answer; the
                    # password is not sent in the clear to find out whether they did.
                    raise StartTlsMissing(
                        "the SMTP server did not offer STARTTLS, so its password was not sent "
                        "(use smtps://, or a server offering STARTTLS)"
                    )
            if parts.username:
                client.login(unquote(parts.username), unquote(parts.password or ""))
            # The envelope names the recipient: left to the library, it is read from the To
            # header, whose syntax can name others.
            client.send_message(message, to_addrs=[recipient])


def kept_error(error: str, delivery: Delivery) -> str:
    """The error as stored: a webhook's URL credentials elided before the text is cut, since a
    cut could leave a piece of one too short to be recognised afterwards."""
    if delivery.target.kind == "webhook":
        error = scrubbed(error, delivery.target.url)
    if len(error) <= MAX_ERROR_LENGTH:
        return error
    return error[: MAX_ERROR_LENGTH - 1] + "…"


class Notifier:
    """Sends due deliveries. ``smtp`` None: email targets fail with a clear error."""

    def __init__(
        self,
        db: Database,
        vault: KeyVault,
        clock: Clock,
        *,
        post_webhook: PostWebhook,
        smtp: SmtpSettings | None,
    ) -> None:
        self.db = db
        self.vault = vault
        self.clock = clock
        self.post_webhook = post_webhook
        self.smtp = smtp
        self._keys_checked_at: int | None = None

    def run_once(self) -> int:
        """Fan new events out and attempt every due delivery; returns how many were attempted."""
        with self.db.write() as conn:
            self._queue_expiring_keys(conn)
            notification_repo.fan_out(conn, self.clock.now())
        with self.db.read() as conn:
            due = notification_repo.due_deliveries(conn, self.clock.now())
        for delivery in due:
            error = self._attempt(delivery)
            self._record(delivery, error)
        return len(due)

    def _queue_expiring_keys(self, conn: Connection) -> None:
        now = self.clock.now()
        last = self._keys_checked_at
        if last is not None and now - last < KEY_CHECK_INTERVAL_SECONDS:
            return
        self._keys_checked_at = now
        expiring = notification_repo.expiring_keys_untold(
            conn, now, within=KEY_EXPIRY_NOTICE_SECONDS
        )
        for key in expiring:
            notification_repo.queue_event(
                conn,
                key.account_id,
                KEY_EXPIRING,
                detail=(
                    f"The API key {key.display_prefix}… expires at {iso(key.expires_at)}; "
                    "payments made with it are refused after that. Create a new key in the "
                    "portal once it has expired, or revoke it and create one now."
                ),
                now=now,
            )

    def _record(self, delivery: Delivery, error: str | None) -> None:
        if error is not None:
            error = kept_error(error, delivery)
        now = self.clock.now()
        retry_at = None
        if error is not None and delivery.attempts < len(RETRY_DELAYS):
            retry_at = now + RETRY_DELAYS[delivery.attempts]
        with self.db.write() as conn:
            notification_repo.record_attempt(
                conn, delivery.id, now=now, error=error, retry_at=retry_at
            )
        log.info(
            "notification_attempt",
            delivery=delivery.id,
            kind=delivery.target.kind,
            notified=delivery.event.event,
            attempt=delivery.attempts + 1,
            delivered=error is None,
            # Not the error's text: it can quote the webhook's URL, and many carry their
            # credential in it. The holder reads it on the notifications page.
        )

    def _attempt(self, delivery: Delivery) -> str | None:
        """None when delivered, else what went wrong (no secret in it)."""
        try:
            if delivery.target.kind == "webhook":
                return asyncio.run(self._post_webhook(delivery))
            return self._email(delivery)
        except Exception as exc:  # one target's failure must not stop the others
            log.exception("notification_failed", delivery=delivery.id)
            return f"{type(exc).__name__}"

    async def _post_webhook(self, delivery: Delivery) -> str | None:
        sealed = delivery.target.sealed_secret
        if sealed is None:
            return "the webhook has no secret"
        secret = self.vault.open(
            webhook_context(delivery.target.id), SealedSecret.from_bytes(sealed)
        ).decode("ascii")
        body = json.dumps(payload(delivery), separators=(",", ":")).encode()
        timestamp = self.clock.now()
        headers = {
            "content-type": "application/json",
            "user-agent": "paysign-webhooks",
            "webhook-id": delivery.id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign_webhook(secret, delivery.id, timestamp, body),
        }
        try:
            status = await self.post_webhook(delivery.target.url, headers, body)
        except WebhookUnreachable as unreachable:
            return str(unreachable)
        if 200 <= status < 300:
            return None
        return f"the webhook answered HTTP {status}"

    def _email(self, delivery: Delivery) -> str | None:
        if self.smtp is None:
            return "email is not configured on this server (PAYSIGN_SMTP_URL)"
        if not is_plain_address(delivery.target.url):
            # Checked again when sent: an address stored under a looser check could name others.
            return "not a plain email address; remove it and add the address again"
        event = delivery.event
        message = EmailMessage()
        message["From"] = self.smtp.sender
        message["To"] = delivery.target.url
        message["Subject"] = f"paysign: {_SUBJECTS.get(event.event, event.event)}"
        message["Message-ID"] = f"<{delivery.id}@paysign>"
        lines = [event.detail, ""]
        if event.seller_host:
            lines += [
                f"Seller: {event.seller_host}{event.seller_path}",
                f"Amount: {format_usdc(event.amount)} USDC",
                f"When: {iso(event.created_at)}",
            ]
        message.set_content("\n".join(lines))
        try:
            self.smtp.send(message, delivery.target.url)
        except (OSError, smtplib.SMTPException) as exc:
            return f"sending the email failed: {type(exc).__name__}: {exc}"
        return None
