"""The overview page over real HTTP: spend against the caps as bars with numbers, the last few
payments, the testnet balance read from the (real, anvil) sandbox chain or "balance
unavailable" when the chain is down, the "request test funds" button, and the key page's copy
button with the script the CSP lets it load."""

from __future__ import annotations

import dataclasses
import html
import re
import socket
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from conftest import FrozenClock, LiveServer, free_port, signature_body
from paysign.app import create_app
from paysign.bootstrap import Runtime
from paysign.chain.testnet import READ_TIMEOUT_SECONDS, SandboxChain
from paysign.services import accounts, keys, policy
from portal.browser_support import ARTIFACTS as TEST_ARTIFACTS
from portal.conftest import PASSWORD, code, csrf_of, error_of, redirected, sign_in, signed_in

ARTIFACTS = TEST_ARTIFACTS / "dashboard"

ALLOWED = "api.example.com"


def _notice_of(page: httpx.Response) -> str:
    found = re.search(r'<p class="notice" role="status">([^<]*)</p>', page.text)
    assert found, page.text
    return html.unescape(found.group(1))


def _balance_of(page: httpx.Response) -> str:
    found = re.search(r'<td id="balance">(.*?)</td>', page.text)
    assert found, page.text
    return re.sub(r"<[^>]+>", "", found.group(1))


def _set_caps(runtime: Runtime, email: str, daily: int | None, monthly: int | None) -> None:
    document = policy.get_policy(runtime.db, email=email)
    document.pop("pending", None)
    document["caps"] = {**document["caps"], "daily": daily, "monthly": monthly}
    policy.set_policy(runtime.db, runtime.clock, email=email, document=document)


def test_spend_bars_and_recent_payments(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    issued = keys.issue_key(runtime.db, clock, email=holder.email, expires_in_days=30)
    policy.decide_seller(runtime.db, clock, email=holder.email, seller=ALLOWED, kind="allow")
    _set_caps(runtime, holder.email, daily=1_000_000, monthly=10_000_000)
    auth = {"Authorization": f"Bearer {issued.api_key}"}
    for i in range(6):  # live payments of 0.1 USDC, one second apart
        body = signature_body(
            network="eip155:8453", amount="100000", seller_url=f"https://{ALLOWED}/p{i}"
        )
        signed = browser.post("/wallets/signatures", json=body, headers=auth)
        assert signed.status_code == 200, signed.text
        clock.advance(1)
    sandbox = browser.post(
        "/wallets/signatures",
        json=signature_body(amount="250000", seller_url=f"https://{ALLOWED}/sandbox"),
        headers={**auth, "X-Sandbox-Mode": "true"},
    )
    assert sandbox.status_code == 200, sandbox.text

    page = signed_in(browser, holder, clock)
    assert page.status_code == 200
    assert f'id="wallet">{holder.wallet_address}<' in page.text
    # No sandbox chain in this runtime: the page says so instead of a number.
    assert _balance_of(page).startswith("balance unavailable")
    assert "no sandbox chain is configured" in _balance_of(page)

    # The bars, with their numbers in text (sandbox payments count against no cap).
    spend = page.text.split('id="spend"')[1].split("</ul>")[0]
    assert "Today (UTC): 0.6 of 1 USDC (60%)" in spend
    assert "This month (UTC): 0.6 of 10 USDC (6%)" in spend
    assert re.search(r'aria-label="Today \(UTC\): 0.6 of 1 USDC \(60%\)"', spend)
    assert '<rect class="used" width="60" height="4"' in spend
    assert '<rect class="used" width="6" height="4"' in spend

    # The last five signatures, newest first: the sandbox one, then p5 down to p2.
    recent = page.text.split('id="recent"')[1].split("</table>")[0]
    rows = re.findall(
        r'<tr><td data-label="Time">(<time [^>]+>[^<]+</time>)</td>'
        r'<td class="mono" data-label="Seller">([^<]+)</td>',
        recent,
    )
    assert [seller for _, seller in rows] == [
        f"{ALLOWED}/sandbox",
        *(f"{ALLOWED}/p{i}" for i in (5, 4, 3, 2)),
    ]
    # Networks by name, times readable with the exact value beside them.
    amount, network = '<td data-label="Amount (USDC)">', '<td data-label="Network">'
    assert f"{amount}0.25</td>{network}Base Sepolia (sandbox)</td>" in recent
    assert f"{amount}0.1</td>{network}Base</td>" in recent
    assert rows[1][0] == (
        '<time datetime="2026-09-21T14:13:25Z" title="2026-09-21T14:13:25Z">'
        "21 Sep 2026, 14:13 UTC</time>"
    )
    assert 'id="pending-count"><a href="/portal/approvals">0</a>' in page.text

    # A spend over a lowered cap fills the bar and no more.
    _set_caps(runtime, holder.email, daily=500_000, monthly=None)
    lowered = browser.get("/portal/").text
    assert "Today (UTC): 0.6 of 0.5 USDC (100%)" in lowered
    assert "This month (UTC): 0.6 USDC spent, no cap" in lowered


def test_a_new_account_shows_an_empty_overview(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    page = signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    assert page.status_code == 200
    assert 'id="recent">No payments signed yet.' in page.text
    assert "Today (UTC): 0 of " in page.text
    # Nothing on the page loads from elsewhere: the CSP would block it anyway.
    assert not re.search(r'(src|href)="(https?:)?//', page.text)


@pytest.fixture
def down_runtime(runtime: Runtime) -> Iterator[Runtime]:
    """A runtime whose sandbox chain is a closed port on this machine: nothing answers."""
    dead = SandboxChain(
        f"http://127.0.0.1:{free_port()}",
        usdc=bytes(20),
        treasury_key=bytes(31) + b"\x01",
        timeout=1,
    )
    yield dataclasses.replace(runtime, sandbox_chain=dead)
    dead.close()


def test_chain_unreachable_the_page_still_renders(
    down_runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = down_runtime.clock  # type: ignore[assignment]
    with (
        LiveServer(create_app(down_runtime)) as server,
        httpx.Client(base_url=server.url, timeout=30) as browser,
    ):
        page = signed_in(browser, holder, clock)
        assert page.status_code == 200
        assert _balance_of(page).startswith("balance unavailable")
        assert "did not answer" in _balance_of(page)
        assert f'id="wallet">{holder.wallet_address}<' in page.text

        refused = browser.post("/portal/faucet", data={"csrf": csrf_of(page)})
        assert refused.status_code == 503
        assert "did not take the transfer" in html.unescape(error_of(refused))
        assert _balance_of(refused).startswith("balance unavailable")


def test_a_silent_chain_costs_the_page_only_a_short_wait(
    runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    # A node that takes the connection and never answers: the read times out, the page renders.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        chain = SandboxChain(
            f"http://127.0.0.1:{silent.getsockname()[1]}", usdc=bytes(20), treasury_key=None
        )
        hanging = dataclasses.replace(runtime, sandbox_chain=chain)
        with (
            LiveServer(create_app(hanging)) as server,
            httpx.Client(base_url=server.url, timeout=30) as browser,
        ):
            signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
            # The holder's patience, generous: well past the balance read's own limit, short
            # of the chain client's 10 s for sends, which a balance read must not wait for.
            page = browser.get("/portal/", timeout=4 * READ_TIMEOUT_SECONDS)
        chain.close()
    assert page.status_code == 200
    assert _balance_of(page).startswith("balance unavailable")


@pytest.fixture
def chained_browser(chained_runtime: Runtime) -> Iterator[httpx.Client]:
    with (
        LiveServer(create_app(chained_runtime)) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        yield client


def test_balance_from_the_chain_and_test_funds(
    chained_browser: httpx.Client, chained_runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    chain = chained_runtime.sandbox_chain
    assert chain is not None
    page = signed_in(chained_browser, holder, clock)
    assert page.status_code == 200
    assert _balance_of(page).startswith("0 USDC")

    # The button's form carries the CSRF token; without it nothing is sent.
    assert 'action="/portal/faucet"' in page.text
    forged = chained_browser.post("/portal/faucet", data={"csrf": "not the token"})
    assert forged.status_code == 403

    sent = chained_browser.post("/portal/faucet", data={"csrf": csrf_of(page)})
    granted = redirected(chained_browser, sent, "/portal/")
    notice = _notice_of(granted)
    assert notice.startswith("10 test USDC were sent to your wallet")
    assert re.search(r"transaction 0x[0-9a-f]{64} on Base Sepolia", notice)
    # The balance is read from the chain: the transfer is mined, so the page shows it.
    from paysign.protocol import parse_address

    on_chain = chain.usdc_balance(parse_address(holder.wallet_address))
    assert on_chain == chained_runtime.settings.test_funds_amount
    assert _balance_of(granted).startswith("10 USDC")

    # Once per 24 hours: the faucet's refusal, as a 429 with Retry-After, on the same page.
    again = chained_browser.post("/portal/faucet", data={"csrf": csrf_of(granted)})
    assert again.status_code == 429
    assert int(again.headers["retry-after"]) == 24 * 3600
    assert "the next grant is possible at" in html.unescape(error_of(again))
    assert _balance_of(again).startswith("10 USDC")


def test_copy_button_script_and_csp(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    assert (
        sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock)).status_code == 303
    )
    page = browser.get("/portal/keys")
    csp = page.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["default-src"] == "'none'"
    assert "unsafe" not in directives["script-src"] and "unsafe-eval" not in csp

    clock.advance(30)
    created = browser.post(
        "/portal/keys",
        data={"csrf": csrf_of(page), "days": "30", "totp": code(holder.totp_secret, clock)},
    )
    assert created.status_code == 200, created.text
    # Without the script the key is there as text; the button starts hidden and the script
    # (from the portal itself, never inline) reveals it.
    assert re.search(
        r'<code class="secret" id="new-key">psk_[A-Za-z0-9_-]{43}</code>', created.text
    )
    assert '<button type="button" data-copy="new-key" data-status="copy-status" hidden>' in (
        created.text
    )
    scripts = re.findall(r"<script[^>]*>", created.text)
    assert scripts == ['<script src="/portal/static/portal.js" defer>']
    assert "</script>" in created.text.split(scripts[0])[1][:10]  # no inline code

    script = browser.get("/portal/static/portal.js")
    assert script.status_code == 200
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert script.headers["x-content-type-options"] == "nosniff"
    assert "navigator.clipboard.writeText" in script.text and "data-copy" in script.text
    # Like every portal path, it refuses API keys.
    token = {"Authorization": "Bearer psk_" + "x" * 43}
    assert browser.get("/portal/static/portal.js", headers=token).status_code == 403


def _sign_in_and_create_key(page: Page, holder: accounts.CreatedAccount, clock: FrozenClock) -> str:
    clock.advance(30)
    page.goto("/portal/sign-in")
    page.fill("input[name=email]", holder.email)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=totp]", code(holder.totp_secret, clock))
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in", exact=True).click()
    page.goto("/portal/keys")
    page.fill("input[name=days]", "30")
    clock.advance(30)
    page.fill("input[name=totp]", code(holder.totp_secret, clock))
    with page.expect_navigation():
        page.get_by_role("button", name="Create key", exact=True).click()
    key = page.locator("#new-key").inner_text().strip()
    assert re.fullmatch(r"psk_[A-Za-z0-9_-]{43}", key), key
    return key


def test_copy_button_in_a_real_browser(
    chromium: Browser, server: LiveServer, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    # Without JavaScript the page still does its job: the key is shown; the button, which
    # could not work, stays hidden.
    plain = chromium.new_context(base_url=server.url, java_script_enabled=False)
    try:
        page = plain.new_page()
        _sign_in_and_create_key(page, holder, clock)
        expect(page.get_by_role("button", name="Copy the key")).to_be_hidden()
        with page.expect_navigation():
            page.get_by_role("button", name="Revoke this key", exact=True).click()
    finally:
        plain.close()

    context = chromium.new_context(base_url=server.url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    page = context.new_page()
    # A script the CSP blocked, or one that failed, shows up as a console error.
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    try:
        key = _sign_in_and_create_key(page, holder, clock)
        copy = page.get_by_role("button", name="Copy the key", exact=True)
        expect(copy).to_be_visible()  # the script ran and revealed it
        copy.click()
        expect(page.locator("#copy-status")).to_have_text("Copied.")
        assert page.evaluate("navigator.clipboard.readText()") == key
        page.screenshot(path=ARTIFACTS / "key-copied.png", full_page=True)
        page.goto("/portal/")
        page.screenshot(path=ARTIFACTS / "overview.png", full_page=True)
        assert not problems, problems
    finally:
        context.close()
