"""Notifications end to end below the browser (SQLite and PostgreSQL): a refusal the holder
must act on queues an event in its own transaction, only for an account with a target; the
delivery job signs webhooks per Standard Webhooks (checked with the ``standardwebhooks``
package), sends them only to addresses the outbound guard allows, retries with backoff, and
sends email through a real SMTP server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from standardwebhooks.webhooks import Webhook

from conftest import FrozenClock, signature_body
from notification_support import SmtpSink, WebhookReceiver, notifier
from paysign.bootstrap import Runtime
from paysign.services import notifications
from paysign.services.notification_delivery import RETRY_DELAYS
from paysign.store import notification_repo, policy_repo
from paysign.store.schema import notification_outbox

WAITING_SELLER = "https://waiting-seller.example.net/v1/data"


@pytest.fixture
def clock() -> FrozenClock:
    # Now: a receiver refuses a webhook-timestamp far from its own clock (replay protection).
    return FrozenClock(int(time.time()))


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as live:
        yield live


def agent_pays(http: httpx.Client, api_key: str, seller: str) -> httpx.Response:
    return http.post(
        "/wallets/signatures",
        json=signature_body(seller_url=seller),
        headers={"Authorization": f"Bearer {api_key}"},
    )


def outbox(runtime: Runtime) -> list[sa.Row[tuple[object, ...]]]:
    with runtime.db.read() as conn:
        return list(conn.execute(sa.select(notification_outbox)).all())


def test_a_pending_seller_reaches_the_webhook_correctly_signed(
    runtime: Runtime, http: httpx.Client, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    new = notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    assert new.secret.startswith("whsec_")

    refused = agent_pays(http, account["api_key"], WAITING_SELLER)
    assert refused.status_code == 403
    assert refused.json()["type"].endswith("allow-pending")
    assert notifier(runtime).run_once() == 1

    [hook] = receiver.received
    # An independent check of the signature: the Standard Webhooks reference library.
    Webhook(new.secret).verify(hook.body, hook.headers)
    event = json.loads(hook.body)
    assert event["type"] == "payment.allow-pending"
    assert event["data"]["sellerHost"] == "waiting-seller.example.net"
    assert event["data"]["accountId"] == account["account_id"]
    [delivery] = notifications.notification_settings(runtime.db, account["account_id"]).deliveries
    assert (delivery.status, delivery.attempts, delivery.id) == (
        "delivered",
        1,
        hook.headers["webhook-id"],
    )


def test_a_forged_or_replayed_signature_does_not_verify(
    runtime: Runtime, http: httpx.Client, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    new = notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    notifier(runtime).run_once()
    [hook] = receiver.received
    other_secret = notifications.new_webhook_secret()
    with pytest.raises(Exception, match="signature"):
        Webhook(other_secret).verify(hook.body, hook.headers)
    with pytest.raises(Exception, match="signature"):
        Webhook(new.secret).verify(hook.body.replace(b"test", b"tesT"), hook.headers)


def test_no_target_no_event_and_a_signed_payment_queues_nothing(
    runtime: Runtime, http: httpx.Client, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    assert agent_pays(http, account["api_key"], WAITING_SELLER).status_code == 403
    assert outbox(runtime) == []
    notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    assert agent_pays(http, account["api_key"], "https://api.example.com/w").status_code == 200
    assert outbox(runtime) == []


def test_an_agent_retrying_a_refused_payment_does_not_flood_the_holder(
    runtime: Runtime, http: httpx.Client, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    for _ in range(3):
        assert agent_pays(http, account["api_key"], WAITING_SELLER).status_code == 403
    assert len(outbox(runtime)) == 1
    clock.advance(3601)
    assert agent_pays(http, account["api_key"], WAITING_SELLER).status_code == 403
    assert len(outbox(runtime)) == 2


def test_an_agent_making_up_a_new_path_for_each_refusal_does_not_flood_the_holder(
    runtime: Runtime, http: httpx.Client, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    """The attack: each refused payment names another path of the seller, so the once-an-hour
    rule per seller never applies. The holder is told at most MAX_NOTIFICATIONS_PER_HOUR
    times an hour of a kind; the activity still records every refusal."""
    from paysign.services import policy
    from paysign.store.signing_sql import MAX_NOTIFICATIONS_PER_HOUR

    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    document = policy.get_policy(runtime.db, email=account["email"])
    document["caps"] = {**document["caps"], "perPayment": 5000}
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)
    notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    tries = MAX_NOTIFICATIONS_PER_HOUR + 10
    for n in range(tries):
        refused = agent_pays(http, account["api_key"], f"https://api.example.com/item/{n}")
        assert refused.json()["type"].endswith("spend-cap-exceeded"), refused.text
    assert len(outbox(runtime)) == MAX_NOTIFICATIONS_PER_HOUR
    with runtime.db.read() as conn:
        assert len(list(policy_repo.refusals_of(conn, account["account_id"]))) == tries
    clock.advance(3601)
    agent_pays(http, account["api_key"], "https://api.example.com/item/next-hour")
    assert len(outbox(runtime)) == MAX_NOTIFICATIONS_PER_HOUR + 1


def test_a_rolled_back_refusal_queues_nothing(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    from paysign.store.policy_repo import RefusalRecord
    from paysign.store.signing_store import signing_store_for

    notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    record = RefusalRecord(
        account["account_id"], None, "x.example", "/", "eip155:84532", 1, True,
        "allow-pending", None, "waiting", runtime.clock.now(),
    )  # fmt: skip
    store = signing_store_for(runtime.db)
    try:
        with pytest.raises(RuntimeError), store.transaction() as tx:
            tx.record_refusal(record)
            raise RuntimeError("the request failed after its refusal was recorded")
        assert outbox(runtime) == []
        with store.transaction() as tx:
            tx.record_refusal(record)
    finally:
        store.close()
    assert [row.event for row in outbox(runtime)] == ["allow-pending"]


def test_a_webhook_to_a_private_address_is_not_called_unless_allowed(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    """The attack: a holder points a webhook at the server's own network (127.0.0.1 here)."""
    notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    notifier(runtime, allow_private=False).run_once()
    assert receiver.received == []
    [delivery] = notifications.notification_settings(runtime.db, account["account_id"]).deliveries
    assert delivery.status == "pending"
    assert delivery.attempts == 1
    assert delivery.last_error is not None and "127.0.0.1" in delivery.last_error


def test_a_failed_delivery_is_retried_with_backoff_then_given_up(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    receiver.statuses = [500] * (len(RETRY_DELAYS) + 1)
    sender = notifier(runtime)
    assert sender.run_once() == 1
    assert sender.run_once() == 0  # not due before its backoff
    for delay in RETRY_DELAYS:
        clock.advance(delay)
        assert sender.run_once() == 1
    [delivery] = notifications.notification_settings(runtime.db, account["account_id"]).deliveries
    assert (delivery.status, delivery.attempts) == ("failed", len(RETRY_DELAYS) + 1)
    assert delivery.last_error == "the webhook answered HTTP 500"
    clock.advance(10**6)
    assert sender.run_once() == 0
    assert len(receiver.received) == len(RETRY_DELAYS) + 1


def test_a_retried_delivery_succeeds_once_the_webhook_answers(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    receiver.statuses = [503]
    sender = notifier(runtime)
    sender.run_once()
    clock.advance(RETRY_DELAYS[0])
    sender.run_once()
    [delivery] = notifications.notification_settings(runtime.db, account["account_id"]).deliveries
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("delivered", 2, None)
    first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"]


def test_a_key_about_to_expire_is_told_once(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    sender = notifier(runtime)
    assert sender.run_once() == 0  # the key (30 days) is far from expiring
    clock.advance(27 * 24 * 3600 + 1)  # less than 3 days left
    assert sender.run_once() == 1
    clock.advance(24 * 3600)
    assert sender.run_once() == 0
    [hook] = receiver.received
    event = json.loads(hook.body)
    assert event["type"] == "key.expiring"
    assert "expires at" in event["data"]["detail"]
    assert "sellerHost" not in event["data"]


def test_a_spend_cap_refusal_reaches_an_email_address(
    runtime: Runtime, http: httpx.Client, account: dict[str, str]
) -> None:
    from paysign.services import policy

    document = policy.get_policy(runtime.db, email=account["email"])
    document["caps"] = {**document["caps"], "perPayment": 5000}
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)
    notifications.add_email(runtime.db, runtime.clock, account["account_id"], "me@example.org")
    refused = agent_pays(http, account["api_key"], "https://api.example.com/w")
    assert refused.json()["type"].endswith("spend-cap-exceeded"), refused.text
    with SmtpSink() as smtp:
        notifier(runtime, smtp=smtp.url).run_once()
    [mail] = smtp.messages
    assert mail["To"] == "me@example.org"
    assert mail["From"] == "paysign@example.org"
    assert "cap" in mail["Subject"]
    assert "api.example.com" in mail.get_payload()


def test_email_without_smtp_is_recorded_as_failing_not_lost(
    runtime: Runtime, account: dict[str, str]
) -> None:
    notifications.add_email(runtime.db, runtime.clock, account["account_id"], "me@example.org")
    notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    notifier(runtime).run_once()
    [delivery] = notifications.notification_settings(runtime.db, account["account_id"]).deliveries
    assert delivery.status == "pending"
    assert "PAYSIGN_SMTP_URL" in (delivery.last_error or "")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/x",
        "javascript:alert(1)",
        "https://user:pw@example.org/",
        "",
        "http://[::1",
        "https://example.org:99999/x",
        "https://example.org:0/x",
        "https://example.org:port/x",
    ],
)
def test_a_webhook_url_that_is_not_http_is_refused(
    runtime: Runtime, account: dict[str, str], url: str
) -> None:
    from paysign.errors import InvalidAccountInput

    with pytest.raises(InvalidAccountInput):
        notifications.add_webhook(
            runtime.db, runtime.vault, runtime.clock, account["account_id"], url
        )
    with runtime.db.read() as conn:
        assert notification_repo.targets_of(conn, account["account_id"]) == []


def test_the_secret_is_stored_sealed(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    new = notifications.add_webhook(
        runtime.db, runtime.vault, runtime.clock, account["account_id"], receiver.url
    )
    with runtime.db.read() as conn:
        [target] = notification_repo.targets_of(conn, account["account_id"])
    assert target.sealed_secret is not None
    assert new.secret.encode() not in target.sealed_secret
    assert new.secret.removeprefix("whsec_").encode() not in target.sealed_secret


def test_a_webhook_urls_secret_never_reaches_the_log(
    runtime: Runtime, account: dict[str, str]
) -> None:
    """Many webhook URLs carry their credential in the path or query (chat services' incoming
    hooks do): a failed delivery tells the holder on their page, but the log never holds it."""
    from structlog.testing import capture_logs

    from conftest import free_port

    token = "hooktoken-" + "7f3a9c21e4b8d605"
    url = f"http://127.0.0.1:{free_port()}/services/{token}?key={token}"
    notifications.add_webhook(runtime.db, runtime.vault, runtime.clock, account["account_id"], url)
    notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    with capture_logs() as records:
        assert notifier(runtime).run_once() == 1
    [delivery] = notifications.notification_settings(runtime.db, account["account_id"]).deliveries
    assert delivery.status == "pending" and delivery.last_error  # the holder is told why
    assert records, "the attempt is logged"
    assert token not in repr(records)
