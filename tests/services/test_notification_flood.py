"""Notifications cannot be turned into a flood (SQLite and PostgreSQL): "Send a test" is limited
per account, a disabled account's queued deliveries are not sent, and one account's backlog
does not hold back another account's notices."""

from __future__ import annotations

import json

import httpx
import pytest
from test_notifications import clock as clock  # the fixtures: a clock at now, and
from test_notifications import receiver as receiver  # a local webhook receiver

from conftest import FrozenClock, new_account
from notification_support import WebhookReceiver, notifier
from paysign.bootstrap import Runtime
from paysign.services import account_admin, notifications
from paysign.services.notifications import (
    MAX_TARGETS,
    TEST_SENDS_PER_HOUR,
    TooManyTestSends,
)
from paysign.store import notification_repo


def add_webhooks(runtime: Runtime, account_id: str, url: str, count: int) -> None:
    for n in range(count):
        notifications.add_webhook(
            runtime.db, runtime.vault, runtime.clock, account_id, f"{url}/{n}"
        )


def test_pressing_send_a_test_over_and_over_sends_one_a_minute_and_ten_an_hour(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    """The attack: a fresh account with the most targets presses "Send a test" as fast as it
    can, each press a message to every target through the operator's servers."""
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    me = account["account_id"]
    add_webhooks(runtime, me, receiver.url, MAX_TARGETS)

    assert notifications.send_test(runtime.db, clock, me)
    for _ in range(20):
        with pytest.raises(TooManyTestSends) as refused:
            notifications.send_test(runtime.db, clock, me)
        assert 0 < refused.value.retry_after <= 60
        assert "less than a minute ago" in refused.value.detail
    assert notifier(runtime).run_once() == MAX_TARGETS

    clock.advance(30)
    with pytest.raises(TooManyTestSends) as refused:
        notifications.send_test(runtime.db, clock, me)
    assert refused.value.retry_after == 30
    assert "30 seconds" in refused.value.detail

    sent_this_hour = 1
    while sent_this_hour < TEST_SENDS_PER_HOUR:
        clock.advance(61)
        assert notifications.send_test(runtime.db, clock, me)
        sent_this_hour += 1
    clock.advance(61)
    with pytest.raises(TooManyTestSends) as refused:
        notifications.send_test(runtime.db, clock, me)
    assert "an hour" in refused.value.detail and "minutes" in refused.value.detail
    assert 60 < refused.value.retry_after < 3600

    sender = notifier(runtime)
    while sender.run_once():
        pass
    assert len(receiver.received) == TEST_SENDS_PER_HOUR * MAX_TARGETS

    clock.advance(refused.value.retry_after)
    assert notifications.send_test(runtime.db, clock, me)


def test_the_limit_is_each_accounts_own(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    other = new_account(runtime)
    add_webhooks(runtime, account["account_id"], receiver.url, 1)
    add_webhooks(runtime, other["account_id"], receiver.url, 1)
    assert notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    with pytest.raises(TooManyTestSends):
        notifications.send_test(runtime.db, runtime.clock, account["account_id"])
    assert notifications.send_test(runtime.db, runtime.clock, other["account_id"])


def test_the_portal_refuses_a_test_past_the_limit_and_says_when_to_press_again(
    runtime: Runtime, receiver: WebhookReceiver
) -> None:
    from conftest import LiveServer
    from paysign.app import create_app
    from paysign.services import accounts
    from portal.conftest import PASSWORD, csrf_of, error_of, signed_in

    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    holder = accounts.create_account(
        runtime.db, runtime.vault, clock, email="tester@example.com", password=PASSWORD
    )
    add_webhooks(runtime, holder.account_id, receiver.url, 1)
    with (
        LiveServer(create_app(runtime)) as server,
        httpx.Client(base_url=server.url, timeout=10) as browser,
    ):
        signed_in(browser, holder, clock)
        csrf = csrf_of(browser.get("/portal/notifications"))
        first = browser.post("/portal/notifications/test", data={"csrf": csrf})
        assert first.status_code == 303, first.text
        again = browser.post("/portal/notifications/test", data={"csrf": csrf})
    assert again.status_code == 429
    assert again.headers["retry-after"] == "60"
    assert error_of(again) == (
        "No test this time: A test was sent less than a minute ago; send another in 60 seconds."
    )


def test_a_disabled_accounts_queued_deliveries_are_not_sent(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    """The attack: a flood queued before the operator disables the account keeps going out."""
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    flooder = new_account(runtime)
    add_webhooks(runtime, flooder["account_id"], receiver.url + "/flood", MAX_TARGETS)
    add_webhooks(runtime, account["account_id"], receiver.url + "/holder", 1)
    with runtime.db.write() as conn:
        for _ in range(3):
            notification_repo.queue_event(
                conn, flooder["account_id"], "test", detail="flood", now=clock.now()
            )
    assert notifications.send_test(runtime.db, clock, account["account_id"])
    account_admin.disable_account(runtime.db, clock, email=flooder["email"])

    sender = notifier(runtime)
    assert sender.run_once() == 1
    clock.advance(3600)
    assert sender.run_once() == 0
    assert [hook.path for hook in receiver.received] == ["/hooks/paysign/holder/0"]

    account_admin.enable_account(runtime.db, email=flooder["email"])
    assert sender.run_once() > 0


def test_one_accounts_backlog_does_not_hold_back_another_accounts_notice(
    runtime: Runtime, account: dict[str, str], receiver: WebhookReceiver
) -> None:
    """The attack: an account queues far more deliveries than one run of the job sends, before
    another holder's notice; taken oldest first, that notice waits behind all of them (and
    behind every timeout of the attacker's slow webhooks)."""
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    flooder = new_account(runtime)
    add_webhooks(runtime, flooder["account_id"], receiver.url + "/flood", MAX_TARGETS)
    add_webhooks(runtime, account["account_id"], receiver.url + "/holder", 1)
    with runtime.db.write() as conn:
        for _ in range(30):  # 150 deliveries, three runs' worth
            notification_repo.queue_event(
                conn, flooder["account_id"], "test", detail="flood", now=clock.now()
            )
    sender = notifier(runtime)
    with runtime.db.write() as conn:
        notification_repo.fan_out(conn, clock.now())
    clock.advance(1)
    assert notifications.send_test(runtime.db, clock, account["account_id"])

    sender.run_once()
    holder_hooks = [hook for hook in receiver.received if "/holder/" in hook.path]
    assert len(holder_hooks) == 1
    assert json.loads(holder_hooks[0].body)["type"] == "notification.test"
    flood_hooks = [hook for hook in receiver.received if "/flood/" in hook.path]
    assert len(flood_hooks) == notification_repo.DUE_PER_ACCOUNT

    # The backlog is still sent, a round at a time.
    while sender.run_once():
        pass
    assert len(receiver.received) == 1 + 30 * MAX_TARGETS
