"""Against the real ``paysign demo`` command, in headless Chromium: a holder signs up, adds a
webhook and an email address in the portal, and hears of an agent's ``allow-pending`` within
seconds, by a Standard Webhooks delivery signed with the secret the portal showed once and by
an email through a local SMTP server. Then 1 USDC of the faucet's test funds goes to a fresh
address through the withdraw form: the page shows the transaction and the chain moves exactly
1 USDC; a replayed or wrong authenticator code moves nothing. On the demo's SQLite database
and on PostgreSQL."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from notification_support import SmtpSink, WebhookReceiver
from paysign.protocol import address_of, checksum_address
from portal.browser_support import chromium  # noqa: F401  (the browser fixture)

from .running_demo import Authenticator, RunningDemo, usdc_balance, usdc_transfers, wait_until

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery staple"
ONE_USDC = 1_000_000
TEST_FUNDS = 10 * ONE_USDC  # what the faucet grants (PAYSIGN_TEST_FUNDS_AMOUNT)
SANDBOX = {"X-Sandbox-Mode": "true"}
EMAIL_SUBJECT = "paysign: A seller is waiting for your approval"


@pytest.fixture
def smtp() -> Iterator[SmtpSink]:
    with SmtpSink() as sink:
        yield sink


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as live:
        yield live


@pytest.fixture
def demo(tmp_path: Path, database_url: str, smtp: SmtpSink) -> Iterator[RunningDemo]:
    # The webhook receiver is on 127.0.0.1, as the demo's sellers are: the demo lets the
    # outbound guard reach loopback; said here too, so the test does not lean on that default.
    env = {"PAYSIGN_CONNECTOR_ALLOW_PRIVATE": "1", "PAYSIGN_SMTP_URL": smtp.url}
    if not database_url.startswith("sqlite"):  # SQLite: the demo's own, in its data directory
        env["PAYSIGN_DATABASE_URL"] = database_url
    with RunningDemo(tmp_path, env) as running:
        yield running


@pytest.fixture
def page(chromium: Browser, demo: RunningDemo) -> Iterator[Page]:  # noqa: F811
    context = chromium.new_context(base_url=demo.service, viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def click_and_wait(page: Page, button: str) -> None:
    with page.expect_navigation():
        page.get_by_role("button", name=button, exact=True).click()


def sign_up(page: Page, email: str) -> tuple[Authenticator, str]:
    """A new account through the portal, confirmed with a code of the secret it shows once:
    the authenticator and the wallet address."""
    page.goto("/portal/sign-up")
    page.fill("#email", email)
    page.fill("#password", PASSWORD)
    click_and_wait(page, "Create account")
    secret = page.locator("#totp-secret").inner_text().replace(" ", "")
    wallet = re.search(r"0x[0-9a-fA-F]{40}", page.locator("main").inner_text())
    assert wallet, page.content()
    authenticator = Authenticator(secret)
    page.fill("#password", PASSWORD)
    page.fill("#totp", authenticator.fresh())
    click_and_wait(page, "Confirm and sign in")
    assert page.url.endswith("/portal/"), page.url
    return authenticator, wallet.group(0)


def create_api_key(page: Page, authenticator: Authenticator) -> str:
    page.goto("/portal/keys")
    page.fill("#totp", authenticator.fresh())
    click_and_wait(page, "Create key")
    return page.locator("#new-key").inner_text()


def add_notification_targets(page: Page, webhook_url: str, email: str) -> str:
    """The webhook and the email address; the webhook's signing secret, shown once."""
    page.goto("/portal/notifications")
    page.fill("#webhook-url", webhook_url)
    click_and_wait(page, "Add webhook")
    secret = page.locator("#webhook-secret").inner_text()
    assert secret.startswith("whsec_")
    page.fill("#notify-email", email)
    click_and_wait(page, "Add email")
    expect(page.locator("p.notice")).to_have_text("The address is added.")
    expect(page.locator("#targets")).to_contain_text(webhook_url)
    expect(page.locator("#targets")).to_contain_text(email)
    expect(page.locator("body")).not_to_contain_text(secret)  # shown once only
    return secret


def agent_meets_a_new_seller(demo: RunningDemo, api_key: str) -> dict[str, str]:
    """What an agent does: the demo's v1 seller answers 402, its terms go verbatim to
    ``POST /wallets/signatures``; the seller is on no allow list, so the answer is the
    ``allow-pending`` problem, returned."""
    url = f"{demo.sellers}/facts/v1/fact"
    unpaid = httpx.get(url, headers=SANDBOX, timeout=10)
    assert unpaid.status_code == 402, unpaid.text
    refused = httpx.post(
        f"{demo.service}/wallets/signatures",
        json={"sellerUrl": url, "paymentRequired": unpaid.json()},
        headers={"Authorization": f"Bearer {api_key}", **SANDBOX},
        timeout=10,
    )
    assert refused.status_code == 403, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, str] = refused.json()
    assert problem["type"].endswith("/allow-pending"), problem
    return problem


def review_withdrawal(page: Page, to: str, amount: str) -> None:
    page.goto("/portal/withdraw")
    page.select_option("#withdraw-network", "eip155:84532")
    page.fill("#withdraw-to", to)
    page.fill("#withdraw-amount", amount)
    click_and_wait(page, "Review withdrawal")


def test_the_holder_is_told_of_a_pending_seller_and_withdraws_one_usdc(
    page: Page,
    demo: RunningDemo,
    smtp: SmtpSink,
    receiver: WebhookReceiver,
    tmp_path: Path,
) -> None:
    email = f"holder-{secrets.token_hex(4)}@example.org"
    authenticator, wallet = sign_up(page, email)
    api_key = create_api_key(page, authenticator)
    webhook_secret = add_notification_targets(page, receiver.url, email)
    page.screenshot(path=tmp_path / "notifications.png", full_page=True)

    # ---- told, within seconds of the agent's allow-pending ----
    problem = agent_meets_a_new_seller(demo, api_key)
    seller = problem["seller"]
    assert seller.startswith(demo.sellers.removeprefix("http://") + "/facts"), problem
    wait_until(lambda: receiver.received, "a webhook delivery")
    wait_until(lambda: smtp.messages, "an email")

    [hook] = receiver.received
    assert hook.path == "/hooks/paysign"
    Webhook(webhook_secret).verify(hook.body, hook.headers)  # raises unless signed with it
    event = json.loads(hook.body)
    assert event["type"] == "payment.allow-pending"
    assert event["data"]["seller"] == seller
    assert event["data"]["amount"] == 1000  # base units: the 0.001 USDC the seller asks
    forged = {**hook.headers, "webhook-signature": "v1," + "A" * 44}
    with pytest.raises(WebhookVerificationError):
        Webhook(webhook_secret).verify(hook.body, forged)

    [mail] = smtp.messages
    assert mail["To"] == email
    assert mail["Subject"] == EMAIL_SUBJECT
    body = mail.get_payload(decode=True)
    assert isinstance(body, bytes)
    assert f"Seller: {seller}" in body.decode()

    page.goto("/portal/notifications")
    expect(page.locator("#deliveries .status")).to_have_text(["delivered", "delivered"])

    # ---- the withdrawal, of the faucet's test funds ----
    page.goto("/portal/")
    click_and_wait(page, "Request test funds")
    expect(page.locator("p.notice")).to_contain_text("test USDC were sent to your wallet")
    wait_until(lambda: usdc_balance(demo.rpc_url, demo.usdc, wallet) == TEST_FUNDS, "test funds")
    to = checksum_address(address_of(secrets.token_bytes(32)))

    review_withdrawal(page, to.lower(), "1")
    expect(page.locator("#confirm-amount")).to_have_text("1 USDC")
    expect(page.locator("#confirm-to")).to_have_text(to)
    page.screenshot(path=tmp_path / "withdraw-confirm.png", full_page=True)
    assert usdc_balance(demo.rpc_url, demo.usdc, to) == 0  # reviewing sends nothing
    page.fill("#withdraw-totp", authenticator.fresh())
    click_and_wait(page, "Send 1 USDC")

    notice = page.locator("p.notice").inner_text()
    sent = re.search(r"transaction (0x[0-9a-f]{64}) on Base Sepolia", notice)
    assert sent, notice
    assert notice.startswith(f"1 USDC were sent to {to}")
    expect(page.locator("#withdrawals tr").nth(1)).to_contain_text(sent.group(1))
    page.screenshot(path=tmp_path / "withdrawn.png", full_page=True)
    assert usdc_transfers(demo.rpc_url, demo.usdc, sent.group(1)) == [
        (wallet.lower(), to.lower(), ONE_USDC)
    ]
    assert usdc_balance(demo.rpc_url, demo.usdc, to) == ONE_USDC
    assert usdc_balance(demo.rpc_url, demo.usdc, wallet) == TEST_FUNDS - ONE_USDC

    # ---- a replayed code, then a wrong one: refused, and nothing moves ----
    for attempt in (authenticator.replayed(), authenticator.wrong()):
        review_withdrawal(page, to, "1")
        page.fill("#withdraw-totp", attempt)
        click_and_wait(page, "Send 1 USDC")
        expect(page.locator("p.error")).to_contain_text("Nothing was sent.")
        assert usdc_balance(demo.rpc_url, demo.usdc, to) == ONE_USDC
        assert usdc_balance(demo.rpc_url, demo.usdc, wallet) == TEST_FUNDS - ONE_USDC
    expect(page.locator("#withdrawals tr")).to_have_count(2)  # the header and one withdrawal

    demo.assert_log_keeps_secrets(api_key, webhook_secret, authenticator.totp.secret)
