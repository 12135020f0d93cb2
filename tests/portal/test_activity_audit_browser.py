"""In Chromium: the activity's delivery and withdrawal rows fit a phone's width (a long webhook
URL and error wrap rather than widen the page) and pass the portal's page audit (contrast,
labels), in light and dark."""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser

from conftest import FrozenClock, LiveServer
from paysign.bootstrap import Runtime
from paysign.services import accounts
from paysign.store import notification_repo, withdrawal_repo
from paysign.store.notification_repo import Target
from portal.conftest import signed_in

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

AUDIT = (Path(__file__).parent / "page_audit.js").read_text()
LONG_HOOK = "https://a-rather-long-webhook-receiver-name.example.com/hooks/team/paysign-events"


def _history(runtime: Runtime, account_id: str) -> None:
    """A webhook delivery retrying after an error that quotes its URL, and a withdrawal."""
    now = runtime.clock.now()
    with runtime.db.write() as conn:
        notification_repo.add_target(
            conn, Target(secrets.token_hex(8), account_id, "webhook", LONG_HOOK, b"s", now)
        )
        notification_repo.queue_event(
            conn,
            account_id,
            "allow-pending",
            seller_host="very-long-seller-name.example.net",
            seller_path="/v1/some/rather/long/path",
            amount=10_000,
            detail="waiting",
            now=now,
        )
        notification_repo.fan_out(conn, now)
        [delivery] = notification_repo.deliveries_of(conn, account_id)
        notification_repo.record_attempt(
            conn,
            delivery.id,
            now=now,
            error=f"calling {LONG_HOOK} failed: ConnectError: connection refused",
            retry_at=now + 60,
        )
        withdrawal_id = withdrawal_repo.record(
            conn,
            account_id=account_id,
            created_at=now,
            network="eip155:84532",
            sandbox=True,
            from_address="0x" + "11" * 20,
            to_address="0x" + "44" * 20,
            amount=1_000_000,
            nonce=secrets.token_bytes(32),
            valid_before=now + 600,
            fresh_code=True,
            code_verified_at=now,
        )
        withdrawal_repo.finish(conn, withdrawal_id, "sent", "0x" + "cd" * 32)


@pytest.mark.parametrize(("width", "scheme"), [(390, "light"), (390, "dark"), (1280, "light")])
def test_delivery_and_withdrawal_rows_fit_and_pass_the_page_audit(
    chromium: Browser,
    server: LiveServer,
    browser: httpx.Client,
    runtime: Runtime,
    holder: accounts.CreatedAccount,
    width: int,
    scheme: str,
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    _history(runtime, holder.account_id)
    signed_in(browser, holder, clock)
    context = chromium.new_context(
        base_url=server.url,
        viewport={"width": width, "height": 800},
        color_scheme=scheme,  # type: ignore[arg-type]
    )
    try:
        context.add_cookies(
            [
                {"name": c.name, "value": c.value or "", "url": server.url}
                for c in browser.cookies.jar
            ]
        )
        page = context.new_page()
        response = page.goto("/portal/activity")
        assert response is not None and response.status == 200
        assert page.locator("span.delivery[data-status=retrying]").count() == 1
        assert page.locator("span.withdrawal .by").inner_text() == holder.email
        target = page.locator("span.delivery .target").inner_text()
        assert target == LONG_HOOK
        problems = page.evaluate(AUDIT)
        assert not problems, "\n".join(problems)
        wide = page.evaluate("() => document.documentElement.scrollWidth")
        assert wide <= width
    finally:
        context.close()
