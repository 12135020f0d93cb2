"""Withdrawing from the portal in headless Chromium, against the app served with the real dev
chain: 1 USDC to a fresh address, after a confirmation page that shows the amount and the
checksummed address, moves the balance on chain and shows its transaction; a replayed or wrong
authenticator code moves nothing."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from conftest import FrozenClock, LiveServer
from paysign.app import create_app
from paysign.bootstrap import Runtime
from paysign.chain.testnet import SandboxChain
from paysign.protocol import address_of, checksum_address, parse_address
from paysign.services import accounts
from portal.conftest import PASSWORD, code

ONE_USDC = 1_000_000


@pytest.fixture
def chained_server(chained_runtime: Runtime) -> Iterator[LiveServer]:
    with LiveServer(create_app(chained_runtime)) as live:
        yield live


@pytest.fixture
def page(chromium: Browser, chained_server: LiveServer) -> Iterator[Page]:
    context = chromium.new_context(base_url=chained_server.url)
    try:
        yield context.new_page()
    finally:
        context.close()


def click_and_wait(page: Page, button: str) -> None:
    with page.expect_navigation():
        page.get_by_role("button", name=button, exact=True).click()


def review(page: Page, to: str, amount: str) -> None:
    page.goto("/portal/withdraw")
    page.select_option("#withdraw-network", "eip155:84532")
    page.fill("#withdraw-to", to)
    page.fill("#withdraw-amount", amount)
    click_and_wait(page, "Review withdrawal")


def test_withdraw_one_usdc_and_a_replayed_or_wrong_code_moves_nothing(
    page: Page, chained_runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    chain = chained_runtime.sandbox_chain
    assert isinstance(chain, SandboxChain)
    wallet = parse_address(holder.wallet_address)
    chain.send_usdc(wallet, 3 * ONE_USDC)
    to = checksum_address(address_of(secrets.token_bytes(32)))

    page.goto("/portal/sign-in")
    page.fill("input[name=email]", holder.email)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=totp]", code(holder.totp_secret, clock))
    click_and_wait(page, "Sign in")
    with page.expect_navigation():
        page.get_by_role("link", name="Withdraw USDC").click()
    expect(page.locator("#withdrawals")).to_have_text("No withdrawals yet.")

    # Typed in lower case; the confirmation shows it checksummed, with the amount.
    review(page, to.lower(), "1")
    expect(page.locator("#confirm-amount")).to_have_text("1 USDC")
    expect(page.locator("#confirm-to")).to_have_text(to)
    expect(page.locator("#confirm-network")).to_have_text("Base Sepolia")
    assert chain.usdc_balance(parse_address(to)) == 0  # reviewing sends nothing
    clock.advance(30)
    used = code(holder.totp_secret, clock)
    page.fill("#withdraw-totp", used)
    click_and_wait(page, "Send 1 USDC")

    notice = page.locator("p.notice").inner_text()
    found = re.search(r"transaction (0x[0-9a-f]{64}) on Base Sepolia", notice)
    assert found, notice
    assert notice.startswith(f"1 USDC were sent to {to}")
    assert chain.usdc_balance(parse_address(to)) == ONE_USDC
    assert chain.usdc_balance(wallet) == 2 * ONE_USDC
    row = page.locator("#withdrawals tr").nth(1)
    expect(row).to_contain_text(found.group(1))
    expect(row.locator("[data-status]")).to_have_text("Sent")

    # The same code again, then a wrong one: refused, and nothing moves.
    for attempt in (used, f"{(int(used) + 1) % 1_000_000:06d}"):
        review(page, to, "1")
        page.fill("#withdraw-totp", attempt)
        click_and_wait(page, "Send 1 USDC")
        expect(page.locator("p.error")).to_contain_text("Nothing was sent.")
        assert chain.usdc_balance(parse_address(to)) == ONE_USDC
        assert chain.usdc_balance(wallet) == 2 * ONE_USDC
    expect(page.locator("#withdrawals tr")).to_have_count(2)  # the header and one withdrawal

    # In the activity, and in its export, with its transaction and the step-up.
    page.goto("/portal/activity?decision=withdrawn")
    entry = page.locator("#activity tr").nth(1)
    expect(entry.locator('[data-label="Decision"]')).to_have_text("withdrawn")
    expect(entry.locator('[data-label="Pays to"]')).to_have_text(to)
    expect(entry.locator("abbr.tx")).to_have_attribute("title", found.group(1))
    expect(entry).to_contain_text("confirmed with a fresh authenticator code")
    export = page.request.get("/portal/activity.csv").text()
    assert "withdrawn,,1.000000,eip155:84532,true,sent,,,confirmed with a fresh " in export
    assert f"{to},{found.group(1)}" in export


def test_the_confirmation_refuses_what_would_lose_money(
    page: Page, chained_runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    page.goto("/portal/sign-in")
    page.fill("input[name=email]", holder.email)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=totp]", code(holder.totp_secret, clock))
    click_and_wait(page, "Sign in")
    for to, amount, message in (
        ("0x" + "0" * 40, "1", "zero address"),
        (holder.wallet_address, "1", "this wallet's own address"),
        (checksum_address(address_of(secrets.token_bytes(32))), "5", "more than that"),
    ):
        review(page, to, amount)
        expect(page.locator("p.error")).to_contain_text(message)
        expect(page.locator("#withdraw-to")).to_have_value(to)  # kept for correcting
