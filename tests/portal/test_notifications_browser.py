"""Notifications set up in the portal, in headless Chromium (SQLite and PostgreSQL): the holder
registers a webhook and sees its secret once; the server's background job (under its lease)
delivers a correctly signed event within seconds of an agent's ``allow-pending``; "Send a
test" reaches it too, and the page lists every delivery with its status and attempts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from standardwebhooks.webhooks import Webhook

from conftest import FrozenClock, LiveServer, signature_body
from notification_support import WebhookReceiver
from paysign.background import start_notifier
from paysign.bootstrap import Runtime
from paysign.config import Settings
from paysign.services import accounts, keys
from portal.conftest import PASSWORD, code


@pytest.fixture
def clock() -> FrozenClock:
    # Now: a receiver refuses a webhook-timestamp far from its own clock (replay protection).
    return FrozenClock(int(time.time()))


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    # As in tests and `paysign demo`: the receiver is on 127.0.0.1.
    return Settings(
        data_dir=tmp_path / "var",
        database_url=database_url,
        connector_allow_private=True,
        notification_interval_seconds=0.2,
    )


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as live:
        yield live


@pytest.fixture
def page(chromium: Browser, server: LiveServer) -> Iterator[Page]:
    context = chromium.new_context(base_url=server.url)
    try:
        yield context.new_page()
    finally:
        context.close()


def click_and_wait(page: Page, button: str) -> None:
    with page.expect_navigation():
        page.get_by_role("button", name=button, exact=True).click()


def test_a_webhook_registered_in_the_portal_hears_of_a_pending_seller_within_seconds(
    page: Page,
    server: LiveServer,
    runtime: Runtime,
    holder: accounts.CreatedAccount,
    receiver: WebhookReceiver,
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    api_key = keys.issue_key(runtime.db, clock, email=holder.email, expires_in_days=30).api_key
    page.goto("/portal/sign-in")
    page.fill("input[name=email]", holder.email)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=totp]", code(holder.totp_secret, clock))
    click_and_wait(page, "Sign in")
    page.goto("/portal/settings")
    with page.expect_navigation():
        page.get_by_role("link", name="set up notifications").click()
    page.fill("#webhook-url", receiver.url)
    click_and_wait(page, "Add webhook")
    secret = page.locator("#webhook-secret").inner_text()
    assert secret.startswith("whsec_")
    expect(page.locator("#targets")).to_contain_text(receiver.url)
    page.goto("/portal/notifications")
    expect(page.locator("body")).not_to_contain_text(secret)  # shown once only
    expect(page.locator("#targets tr")).to_have_count(2)  # the header and the webhook

    job = start_notifier(runtime)
    try:
        body = signature_body(seller_url="https://new-seller.example.org/api")
        with httpx.Client(base_url=server.url, timeout=10) as agent:
            refused = agent.post(
                "/wallets/signatures", json=body, headers={"Authorization": f"Bearer {api_key}"}
            )
        assert refused.json()["type"].endswith("allow-pending"), refused.text
        [hook] = receiver.wait_for(1)
        Webhook(secret).verify(hook.body, hook.headers)
        event = json.loads(hook.body)
        assert event["type"] == "payment.allow-pending"
        assert event["data"]["seller"] == "new-seller.example.org/api"

        click_and_wait(page, "Send a test")
        _, test_hook = receiver.wait_for(2)
        Webhook(secret).verify(test_hook.body, test_hook.headers)
        assert json.loads(test_hook.body)["type"] == "notification.test"
    finally:
        job.stop()

    page.goto("/portal/notifications")
    rows = page.locator("#deliveries tr")
    expect(rows).to_have_count(3)  # the header and two deliveries
    expect(page.locator("#deliveries")).to_contain_text("allow-pending")
    expect(page.locator("#deliveries .status").first).to_have_text("delivered")
    expect(page.locator("#deliveries .status").last).to_have_text("delivered")
