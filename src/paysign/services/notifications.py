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
from paysign.store import notification_repo, sign_in_repo
from paysign.store.database import Database
from paysign.store.notification_repo import Delivery, Target

MAX_TARGETS = 5

# A plain addr-spec only: a dot-atom local part and a host name. Anything richer (comments,
# quoted strings, group syntax, address literals) lets the mail library read another recipient
# out of the header than the one the holder typed, and control or bidi characters make the
# address read differently on the page than it is sent.
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+")
_MAX_LOCAL_PART = 64
_MAX_DOMAIN = 253

#: Test sends an account may make: one a minute (each goes to every target) and this many an
#: hour, counted when pressed, refused or not.
TEST_SEND_MINUTE = 60
TEST_SEND_HOUR = 3600
TEST_SENDS_PER_HOUR = 10
_TEST_SEND_KEY = "notification-test:"


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


def is_plain_address(address: str) -> bool:
    """Whether ``address`` is a plain ``local@host.example`` address, the only form sent to."""
    local, _, domain = address.rpartition("@")
    return (
        _EMAIL.fullmatch(address) is not None
        and len(local) <= _MAX_LOCAL_PART
        and len(domain) <= _MAX_DOMAIN
    )


def _checked_email(address: str) -> str:
    address = address.strip()
    if not is_plain_address(address):
        raise InvalidAccountInput(
            f"{address[:320]!r} is not a plain email address (name@example.com: letters, "
            "digits and !#$%&'*+/=?^_`{|}~- before the @, a host name after it)."
        )
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


class TooManyTestSends(Exception):
    """The account sent its tests for now; nothing was queued. ``retry_after``: seconds until
    a test can be sent again."""

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after = retry_after


def _in_words(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    return f"{(seconds + 59) // 60} minutes"


def send_test(db: Database, clock: Clock, account_id: str) -> bool:
    """Queue a test event for every target of the account; False when it has none. Raises
    :class:`TooManyTestSends` past the account's limit: each press mails or posts to every
    target through the operator's servers, and sign-up is open to anyone."""
    now = clock.now()
    refusal: TooManyTestSends | None = None
    with db.write() as conn:
        if not notification_repo.targets_of(conn, account_id):
            return False
        sign_in_repo.purge_counts(conn, _TEST_SEND_KEY, now - TEST_SEND_HOUR)
        # Counted before anything is queued, one statement each, so concurrent presses in
        # other processes see each other's counts. The hour counts the presses let through.
        minute, minute_start = sign_in_repo.count_event(
            conn, f"{_TEST_SEND_KEY}minute:{account_id}", now, TEST_SEND_MINUTE
        )
        if minute > 1:
            wait = max(1, minute_start + TEST_SEND_MINUTE - now)
            refusal = TooManyTestSends(
                f"A test was sent less than a minute ago; send another in {_in_words(wait)}.",
                wait,
            )
        else:
            hour, hour_start = sign_in_repo.count_event(
                conn, f"{_TEST_SEND_KEY}hour:{account_id}", now, TEST_SEND_HOUR
            )
            if hour > TEST_SENDS_PER_HOUR:
                wait = max(1, hour_start + TEST_SEND_HOUR - now)
                refusal = TooManyTestSends(
                    f"At most {TEST_SENDS_PER_HOUR} tests an hour are sent; "
                    f"send another in {_in_words(wait)}.",
                    wait,
                )
        if refusal is None:
            notification_repo.queue_event(
                conn,
                account_id,
                "test",
                detail="A test notification from paysign: this target is set up correctly.",
                now=now,
            )
    # Raised once the counts are committed: a refused press counts too.
    if refusal is not None:
        raise refusal
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
