"""Freezing spending from the portal, in headless Chromium (SQLite and PostgreSQL): one click
freezes, and the agent's next payment is refused; unfreezing needs a fresh authenticator code."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from conftest import FrozenClock, LiveServer, signature_body
from paysign.bootstrap import Runtime
from paysign.services import accounts, keys, policy
from portal.conftest import PASSWORD, code


@pytest.fixture
def page(chromium: Browser, server: LiveServer) -> Iterator[Page]:
    context = chromium.new_context(base_url=server.url)
    try:
        yield context.new_page()
    finally:
        context.close()


def agent_pays(server: LiveServer, api_key: str) -> httpx.Response:
    body = signature_body(seller_url="https://api.example.com/weather")
    with httpx.Client(base_url=server.url, timeout=10) as agent:
        return agent.post(
            "/wallets/signatures", json=body, headers={"Authorization": f"Bearer {api_key}"}
        )


def click_and_wait(page: Page, button: str) -> None:
    with page.expect_navigation():
        page.get_by_role("button", name=button, exact=True).click()


def test_the_holder_freezes_in_one_click_and_unfreezes_with_a_fresh_code(
    page: Page, server: LiveServer, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    api_key = keys.issue_key(runtime.db, clock, email=holder.email, expires_in_days=30).api_key
    policy.decide_seller(
        runtime.db, clock, email=holder.email, seller="api.example.com", kind="allow"
    )
    assert agent_pays(server, api_key).status_code == 200

    page.goto("/portal/sign-in")
    page.fill("input[name=email]", holder.email)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=totp]", code(holder.totp_secret, clock))
    click_and_wait(page, "Sign in")
    page.goto("/portal/policy")

    click_and_wait(page, "Freeze spending")
    expect(page.locator("#frozen-notice")).to_contain_text("Spending is frozen")
    assert policy.get_policy(runtime.db, email=holder.email)["frozen"] is True
    refused = agent_pays(server, api_key)
    assert refused.status_code == 403
    assert refused.json()["type"].endswith("/spending-frozen")

    # Without a code the account stays frozen.
    click_and_wait(page, "Unfreeze spending")
    expect(page.locator("p.error")).to_contain_text("fresh authenticator code")
    expect(page.locator("#frozen-notice")).to_be_visible()
    assert agent_pays(server, api_key).status_code == 403

    clock.advance(30)
    page.fill("#unfreeze-totp", code(holder.totp_secret, clock))
    click_and_wait(page, "Unfreeze spending")
    expect(page.get_by_role("button", name="Freeze spending", exact=True)).to_be_visible()
    assert policy.get_policy(runtime.db, email=holder.email)["frozen"] is False
    assert agent_pays(server, api_key).status_code == 200
