"""What a notification tells whom (SQLite and PostgreSQL): an email address is a plain one and
the mail goes to it alone, the SMTP password never crosses the network in the clear, and a
webhook's URL credentials are not left in a delivery's stored error, however long."""

from __future__ import annotations

import pytest

from conftest import free_port
from notification_support import SmtpSink, notifier
from paysign.bootstrap import Runtime
from paysign.errors import InvalidAccountInput
from paysign.services import activity, notifications
from paysign.services.notification_delivery import SmtpSettings
from paysign.store import notification_repo
from paysign.store.activity_outbound import shown_error
from paysign.store.notification_repo import Target


def only_delivery(runtime: Runtime, account_id: str) -> notification_repo.Delivery:
    [delivery] = notifications.notification_settings(runtime.db, account_id).deliveries
    return delivery


@pytest.mark.parametrize(
    "address",
    [
        "all-staff(@partner.example",  # a comment: RCPT TO:<all-staff>
        "x:ceo@corp.example",  # group syntax: RCPT TO:<ceo@corp.example>
        "a[b@x.example",
        "a\\b@x.example",
        "a\x00b@x.example",
        "a\x7fb@x.example",
        "a\u202eb@x.example",  # right-to-left override
        "me@example\u2066.org",
        '"quoted"@x.example',
        "me@[127.0.0.1]",
        "me@localhost",
        "a..b@x.example",
        ".a@x.example",
        "a.@x.example",
        "me@-x.example",
        "me@x..example",
        "me@x_y.example",
        "me@exämple.org",
        "you@x.example,me@y.example",
        "me@x.example\r\nBcc: you@y.example",
        ("a" * 65) + "@x.example",
        "me@" + ("a" * 64) + ".example",
    ],
)
def test_an_address_that_is_not_a_plain_one_is_refused(
    runtime: Runtime, account: dict[str, str], address: str
) -> None:
    with pytest.raises(InvalidAccountInput):
        notifications.add_email(runtime.db, runtime.clock, account["account_id"], address)
    with runtime.db.read() as conn:
        assert notification_repo.targets_of(conn, account["account_id"]) == []


@pytest.mark.parametrize(
    "address",
    [
        "me@example.org",
        "first.last+tag@sub.example.co.uk",
        "o'brien@example.ie",
        "x_y-z=1@xn--bcher-kva.example",
        "  padded@example.org  ",
    ],
)
def test_a_plain_address_is_kept(runtime: Runtime, account: dict[str, str], address: str) -> None:
    target = notifications.add_email(runtime.db, runtime.clock, account["account_id"], address)
    assert target.url == address.strip()


def test_the_mail_goes_to_the_target_alone(runtime: Runtime, account: dict[str, str]) -> None:
    notifications.add_email(runtime.db, runtime.clock, account["account_id"], "me@example.org")
    assert notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    with SmtpSink() as smtp:
        notifier(runtime, smtp=smtp.url).run_once()
    assert smtp.recipients == [["me@example.org"]]
    assert only_delivery(runtime, account["account_id"]).status == "delivered"


def test_the_envelope_names_the_recipient_whatever_the_to_header_says() -> None:
    from email.message import EmailMessage

    message = EmailMessage()
    message["From"] = "paysign@example.org"
    message["To"] = "x:ceo@corp.example;"
    message.set_content("hello")
    with SmtpSink() as smtp:
        SmtpSettings(smtp.url, "paysign@example.org").send(message, "me@example.org")
    assert smtp.recipients == [["me@example.org"]]


@pytest.mark.parametrize("address", ["x:ceo@corp.example", "all-staff(@partner.example"])
def test_an_address_stored_before_the_check_reaches_no_one_else(
    runtime: Runtime, account: dict[str, str], address: str
) -> None:
    """The attack: an address whose header syntax names another recipient, so the mail (and its
    sender's reputation) goes where the holder could not send it directly."""
    me = account["account_id"]
    with runtime.db.write() as conn:
        notification_repo.add_target(
            conn, Target("legacy-address", me, "email", address, None, runtime.clock.now())
        )
    assert notifications.send_test(runtime.db, runtime.clock, me)
    with SmtpSink() as smtp:
        notifier(runtime, smtp=smtp.url).run_once()
    assert smtp.recipients == []
    delivery = only_delivery(runtime, me)
    assert delivery.status == "pending"
    assert "not a plain email address" in (delivery.last_error or "")


def test_the_smtp_password_is_not_sent_when_starttls_is_not_offered(
    runtime: Runtime, account: dict[str, str]
) -> None:
    """The attack: someone on the path removes STARTTLS from the server's EHLO answer and
    reads the password the client then sends in the clear."""
    me = account["account_id"]
    notifications.add_email(runtime.db, runtime.clock, me, "me@example.org")
    assert notifications.send_test(runtime.db, runtime.clock, me)
    with SmtpSink(offer_auth_in_clear=True) as smtp:
        credentialed = smtp.url.replace("smtp://", "smtp://mailer:hunter2-secret@")
        notifier(runtime, smtp=credentialed).run_once()
    assert smtp.logins == []
    assert smtp.messages == []
    delivery = only_delivery(runtime, me)
    assert delivery.status == "pending"
    assert "STARTTLS" in (delivery.last_error or "")
    assert "hunter2" not in (delivery.last_error or "")


def test_smtp_without_credentials_needs_no_starttls(
    runtime: Runtime, account: dict[str, str]
) -> None:
    me = account["account_id"]
    notifications.add_email(runtime.db, runtime.clock, me, "me@example.org")
    assert notifications.send_test(runtime.db, runtime.clock, me)
    with SmtpSink(offer_auth_in_clear=True) as smtp:
        notifier(runtime, smtp=smtp.url).run_once()
    assert len(smtp.messages) == 1
    assert only_delivery(runtime, me).status == "delivered"


SECRET_SEGMENT = "T0SECRETtokenABCDEFGHIJKLMNOP1234"


def pieces_of_the_secret_in(text: str) -> list[str]:
    return [
        SECRET_SEGMENT[:n] for n in range(5, len(SECRET_SEGMENT) + 1) if SECRET_SEGMENT[:n] in text
    ]


def test_a_long_error_cut_to_fit_keeps_no_piece_of_the_webhooks_secret(
    runtime: Runtime, account: dict[str, str]
) -> None:
    """The attack (on the export, which travels further than the page): a webhook URL long
    enough that the stored error is cut inside its credential, leaving a piece shorter than
    anything the activity's scrubber recognises."""
    me = account["account_id"]
    url = f"http://127.0.0.1:{free_port()}/x/" + "ab/" * 150 + SECRET_SEGMENT
    notifications.add_webhook(runtime.db, runtime.vault, runtime.clock, me, url)
    assert notifications.send_test(runtime.db, runtime.clock, me)
    notifier(runtime).run_once()

    delivery = only_delivery(runtime, me)
    assert delivery.last_error and "127.0.0.1" in delivery.last_error  # the holder is told why
    assert len(delivery.last_error) <= 500
    assert pieces_of_the_secret_in(delivery.last_error) == []
    [entry] = activity.activity(runtime.db, email=account["email"])
    assert entry["lastResult"]
    assert pieces_of_the_secret_in(str(entry)) == []


def test_an_error_stored_cut_inside_a_secret_is_shown_without_the_piece() -> None:
    """Errors stored before they were scrubbed first were cut at 500 characters as they were."""
    url = "https://hooks.example.com/x/" + "ab/" * 150 + SECRET_SEGMENT
    stored = f"calling {url} failed: [Errno 111] Connection refused"[:500]
    assert pieces_of_the_secret_in(stored) != []
    shown = shown_error(stored, "webhook", url)
    assert shown is not None and shown.endswith("/ab/…")
    assert pieces_of_the_secret_in(shown) == []
