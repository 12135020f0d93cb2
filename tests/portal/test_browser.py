"""The portal in a real browser: Debian's headless Chromium driven by Playwright against the app
over real HTTP on 127.0.0.1 (SQLite and PostgreSQL). A holder signs up, enrols an authenticator,
creates an API key, approves the seller their agent was refused for, tightens a cap, signs out.

The agent's side is plain HTTP with the key read off the page. A screenshot of each main step is
kept under ``var/test-artifacts/browser/`` so a failure can be looked at afterwards."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, Response, expect

from conftest import FrozenClock, LiveServer, signature_body
from paysign.bootstrap import Runtime
from portal.browser_support import ARTIFACTS as TEST_ARTIFACTS
from portal.conftest import COOKIE, PASSWORD, code

ARTIFACTS = TEST_ARTIFACTS / "browser"
TOTP_STEP = 30

Shot = Callable[[str], None]


@pytest.fixture
def page(chromium: Browser, server: LiveServer) -> Iterator[Page]:
    context = chromium.new_context(base_url=server.url)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def shot(page: Page, request: pytest.FixtureRequest) -> Shot:
    folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    taken = 0

    def take(name: str) -> None:
        nonlocal taken
        taken += 1
        page.screenshot(path=folder / f"{taken:02d}-{name}.png", full_page=True)

    return take


def submit(page: Page, button: str, *, within: str | None = None) -> Response:
    """Click a form's submit button and wait for the page it leads to (after any redirect)."""
    scope = page.locator(within) if within else page
    with page.expect_navigation() as navigation:
        scope.get_by_role("button", name=button, exact=True).click()
    response = navigation.value
    assert response is not None
    return response


def fresh_code(secret: str, clock: FrozenClock) -> str:
    # Each code is accepted once, so every step that needs one moves to the next time step.
    clock.advance(TOTP_STEP)
    return code(secret, clock)


def test_holder_runs_their_agent_from_the_browser(
    page: Page, server: LiveServer, runtime: Runtime, shot: Shot
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    email = f"browser-{secrets.token_hex(4)}@example.com"

    # Sign up, read the authenticator secret off the page, confirm with a code from it.
    page.goto("/portal/sign-up")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", PASSWORD)
    shot("sign-up-form")
    enrol = submit(page, "Create account")
    assert enrol.status == 200
    assert enrol.headers["cache-control"] == "no-store"
    # Shown in groups of four for the eye; the authenticator takes it without the spaces.
    shown = page.locator("#totp-secret").inner_text().strip()
    assert re.fullmatch(r"[A-Z2-7]{4}( [A-Z2-7]{1,4}){3,}", shown), shown
    secret = shown.replace(" ", "")
    shot("enrol-authenticator")
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=totp]", code(secret, clock))
    home = submit(page, "Confirm and sign in")
    assert home.status == 200 and page.url == f"{server.url}/portal/"
    expect(page.locator("body")).to_contain_text(email)
    expect(page.locator("#wallet")).to_have_text(re.compile(r"^0x[0-9a-fA-F]{40}$"))
    shot("overview-after-sign-in")

    # The session cookie is out of reach of scripts and not sent on cross-site subrequests.
    cookies = {c["name"]: c for c in page.context.cookies()}
    signed_in_cookie = cookies[COOKIE]
    assert signed_in_cookie["httpOnly"] is True
    assert signed_in_cookie["sameSite"] == "Lax"
    assert signed_in_cookie["secure"] is False  # plain http on 127.0.0.1
    assert COOKIE not in page.evaluate("document.cookie")

    # Create an API key: the sign-in code is spent, so it takes a fresh one.
    page.get_by_role("link", name="API key", exact=True).click()
    page.fill("input[name=days]", "30")
    page.fill("input[name=totp]", fresh_code(secret, clock))
    shot("create-key-form")
    created = submit(page, "Create key")
    assert created.status == 200
    api_key = page.locator("#new-key").inner_text().strip()
    assert re.fullmatch(r"psk_[A-Za-z0-9_-]{43}", api_key), api_key
    shot("key-created")

    agent = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {api_key}"}, timeout=10
    )
    with agent:
        seller = f"https://quotes-{secrets.token_hex(3)}.example.net/v1/quote"
        host_path = seller.removeprefix("https://")
        body = signature_body(seller_url=seller, amount="10000")  # 0.01 USDC

        # A seller the holder has not allowed waits for their approval.
        pending = agent.post("/wallets/signatures", json=body)
        assert pending.status_code == 403, pending.text
        assert pending.json()["type"].endswith("/allow-pending")

        page.get_by_role("link", name="Approvals", exact=True).click()
        row = page.locator("tr", has_text=host_path)
        expect(row).to_have_count(1)
        row.locator("input[name=totp]").fill(fresh_code(secret, clock))
        shot("approval-pending")
        with page.expect_navigation() as navigation:
            row.get_by_role("button", name="Approve", exact=True).click()
        decided = navigation.value
        assert decided is not None and decided.status == 200
        expect(page.locator("#no-pending")).to_be_visible()
        shot("approval-decided")

        paid = agent.post("/wallets/signatures", json=body)
        assert paid.status_code == 200, paid.text
        assert paid.json()["paymentSignatureHeader"]

        # Lowering the per-payment cap tightens the policy, so no code is needed.
        page.get_by_role("link", name="Policy", exact=True).click()
        page.fill("input[name=perPayment]", "0.005")
        shot("policy-cap-form")
        saved = submit(page, "Save settings")
        assert saved.status == 200
        expect(page.locator("input[name=perPayment]")).to_have_value("0.005")
        expect(page.locator("#allow-rules")).to_contain_text(host_path)
        shot("policy-cap-saved")

        capped = agent.post("/wallets/signatures", json=body)
        assert capped.status_code == 403, capped.text
        problem = capped.json()
        assert problem["type"].endswith("/spend-cap-exceeded")
        assert problem["cap"] == "perPayment"
        assert problem["limit"] == 5000 and problem["amount"] == 10000

    # The activity page shows the agent's story: refused, signed, refused again.
    page.get_by_role("link", name="Activity", exact=True).click()
    expect(page.locator("body")).to_contain_text("allow-pending")
    expect(page.locator("body")).to_contain_text("spend-cap-exceeded")
    shot("activity")

    # Sign out: the signed-in session is ended, not just forgotten by the browser.
    signed_out = submit(page, "Sign out")
    assert signed_out.status == 200 and page.url == f"{server.url}/portal/sign-in"
    shot("signed-out")
    after = {c["name"]: c for c in page.context.cookies()}
    if COOKIE in after:
        assert after[COOKIE]["value"] != signed_in_cookie["value"]
        assert after[COOKIE]["httpOnly"] is True and after[COOKIE]["sameSite"] == "Lax"
    stale = httpx.get(
        f"{server.url}/portal/", cookies={COOKIE: signed_in_cookie["value"]}, timeout=10
    )
    assert stale.status_code == 303 and stale.headers["location"] == "/portal/sign-in"
    page.goto("/portal/")
    assert page.url == f"{server.url}/portal/sign-in"

    # And back in through the sign-in page, with the next code.
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=totp]", fresh_code(secret, clock))
    back = submit(page, "Sign in")
    assert back.status == 200 and page.url == f"{server.url}/portal/"
    expect(page.locator("#pending-count")).to_have_text("0")
    shot("signed-in-again")
