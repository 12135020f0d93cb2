"""The holder's notification targets: webhooks (signed per Standard Webhooks with a secret shown
once) and email addresses, a test event on demand, and what was delivered.

The events themselves are written by the signing path, in the refusal's own transaction
(``store.signing_sql.INSERT_NOTIFICATION``); ``notification_delivery`` sends them."""

from __future__ import annotations

import base64
import re
import secrets
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

from paysign.clock import Clock
from paysign.custody.vault import KeyVault
from paysign.errors import InvalidAccountInput
from paysign.store import notification_repo
from paysign.store.database import Database
from paysign.store.notification_repo import Delivery, Target

MAX_TARGETS = 5
_EMAIL = re.compile(r"^[^@\s<>\"',;]+@[^@\s<>\"',;]+\.[^@\s<>\"',;]+$")


def webhook_context(target_id: str) -> str:
    return f"webhook:{target_id}"


def new_webhook_secret() -> str:
    """``whsec_`` and 24 random bytes in base64, the Standard Webhooks form."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode("ascii")


_WEBHOOK_URL = (
    "A webhook URL is an http:// or https:// address with a host (and a port from 1 to 65535, "
    "if any), at most 2048 characters."
)


def _checked_url(url: str) -> str:
    url = url.strip()
    try:  # a bracketed host that is no IPv6 address, a port out of range
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidAccountInput(_WEBHOOK_URL) from None
    if port == 0 or parts.scheme not in ("https", "http") or not parts.hostname or len(url) > 2048:
        raise InvalidAccountInput(_WEBHOOK_URL)
    if parts.username or parts.password:
        raise InvalidAccountInput("A webhook URL carries no user name or password.")
    return url


def _checked_email(address: str) -> str:
    address = address.strip()
    if len(address) > 320 or not _EMAIL.match(address):
        raise InvalidAccountInput(f"{address!r} is not an email address.")
    return address


def _room_for_one_more(targets: list[Target]) -> None:
    if len(targets) >= MAX_TARGETS:
        raise InvalidAccountInput(
            f"An account has at most {MAX_TARGETS} notification targets; remove one first."
        )


@dataclass(frozen=True, slots=True)
class NewWebhook:
    target: Target
    #: Shown to the holder once; only its sealed form is kept.
    secret: str


def add_webhook(
    db: Database, vault: KeyVault, clock: Clock, account_id: str, url: str
) -> NewWebhook:
    url = _checked_url(url)
    secret = new_webhook_secret()
    target_id = str(uuid.uuid4())
    sealed = vault.seal(webhook_context(target_id), secret.encode("ascii")).to_bytes()
    target = Target(target_id, account_id, "webhook", url, sealed, clock.now())
    with db.write() as conn:
        _room_for_one_more(notification_repo.targets_of(conn, account_id))
        notification_repo.add_target(conn, target)
    return NewWebhook(target, secret)


def add_email(db: Database, clock: Clock, account_id: str, address: str) -> Target:
    address = _checked_email(address)
    target = Target(str(uuid.uuid4()), account_id, "email", address, None, clock.now())
    with db.write() as conn:
        _room_for_one_more(notification_repo.targets_of(conn, account_id))
        notification_repo.add_target(conn, target)
    return target


def remove_target(db: Database, account_id: str, target_id: str) -> bool:
    with db.write() as conn:
        return notification_repo.remove_target(conn, account_id, target_id)


def send_test(db: Database, clock: Clock, account_id: str) -> bool:
    """Queue a test event for every target of the account; False when it has none."""
    with db.write() as conn:
        if not notification_repo.targets_of(conn, account_id):
            return False
        notification_repo.queue_event(
            conn,
            account_id,
            "test",
            detail="A test notification from paysign: this target is set up correctly.",
            now=clock.now(),
        )
    return True


@dataclass(frozen=True, slots=True)
class NotificationSettings:
    targets: list[Target]
    deliveries: list[Delivery]


def notification_settings(db: Database, account_id: str) -> NotificationSettings:
    with db.read() as conn:
        return NotificationSettings(
            notification_repo.targets_of(conn, account_id),
            notification_repo.deliveries_of(conn, account_id),
        )
