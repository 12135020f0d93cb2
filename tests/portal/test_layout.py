"""Every portal page in Chromium at a phone's width (390 px) and a desktop's (1280 px), light and
dark: nothing wider than the window, one ``<main>``, the current page marked in the navigation,
every control labelled, text at AA contrast, focus visible, the activity filters' labels on
their controls. A screenshot of each page and size is written to a temporary folder (its path
is printed) to be looked at.

The layout does not depend on the database, so these run on SQLite only."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from conftest import FrozenClock, LiveServer, signature_body
from paysign.bootstrap import Runtime
from paysign.services import accounts, keys
from portal.conftest import PASSWORD, signed_in

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

WIDTHS = (390, 1280)
SIGNED_IN_PAGES = {
    "overview": "/portal/",
    "connect": "/portal/connect",
    "keys": "/portal/keys",
    "approvals": "/portal/approvals",
    "policy": "/portal/policy",
    "activity": "/portal/activity",
    "settings": "/portal/settings",
}
# Pages reached from another one, with the navigation entry they belong to.
SUB_PAGES = {
    "withdraw": ("/portal/withdraw", "/portal/"),
    "notifications": ("/portal/notifications", "/portal/settings"),
}
SIGNED_OUT_PAGES = {"sign-in": "/portal/sign-in", "sign-up": "/portal/sign-up"}

# What each page is checked for, in the page itself (see the file).
AUDIT = (Path(__file__).parent / "page_audit.js").read_text()


@dataclass
class Holder:
    """A signed-in account holder whose agent has paid one seller, was refused by another (now
    waiting for approval), and holds an API key."""

    account: accounts.CreatedAccount
    cookies: list[dict[str, str]]
    api_key: str


@pytest.fixture
def holder_with_history(
    browser: httpx.Client, server: LiveServer, runtime: Runtime, holder: accounts.CreatedAccount
) -> Holder:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    issued = keys.issue_key(runtime.db, clock, email=holder.email, expires_in_days=30)
    auth = {"Authorization": f"Bearer {issued.api_key}"}
    tag = secrets.token_hex(3)
    # A long seller address, as real ones are: it must wrap or scroll, not widen the page.
    waiting = f"https://very-long-seller-name-{tag}.example.net/v1/some/rather/long/path"
    refused = browser.post(
        "/wallets/signatures", json=signature_body(seller_url=waiting), headers=auth
    )
    assert refused.status_code == 403, refused.text
    signed_in(browser, holder, clock)
    cookies = [
        {"name": c.name, "value": c.value or "", "url": server.url} for c in browser.cookies.jar
    ]
    return Holder(holder, cookies, issued.api_key)


@pytest.fixture
def screens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("portal-screens")
    print(f"portal screenshots: {folder}")
    return folder


@pytest.fixture
def open_context(chromium: Browser, server: LiveServer) -> Iterator[Callable[..., BrowserContext]]:
    opened: list[BrowserContext] = []

    def open_one(width: int, scheme: str = "light") -> BrowserContext:
        context = chromium.new_context(
            base_url=server.url,
            viewport={"width": width, "height": 800},
            color_scheme=scheme,  # type: ignore[arg-type]
        )
        opened.append(context)
        return context

    yield open_one
    for context in opened:
        context.close()


def _audit(page: Page, name: str, folder: Path, width: int, scheme: str) -> list[str]:
    page.screenshot(path=folder / f"{name}-{width}-{scheme}.png", full_page=True)
    return [f"{name} at {width}px ({scheme}): {problem}" for problem in page.evaluate(AUDIT)]


@pytest.mark.parametrize(("width", "scheme"), [(390, "light"), (1280, "light"), (390, "dark")])
def test_every_signed_in_page_fits_and_is_accessible(
    holder_with_history: Holder,
    open_context: Callable[..., BrowserContext],
    screens: Path,
    width: int,
    scheme: str,
) -> None:
    context = open_context(width, scheme)
    context.add_cookies(holder_with_history.cookies)  # type: ignore[arg-type]
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    for name, path in SIGNED_IN_PAGES.items():
        response = page.goto(path)
        assert response is not None and response.status == 200, (name, page.url)
        problems += _audit(page, name, screens, width, scheme)
        current = page.locator('nav a[aria-current="page"]')
        assert current.count() == 1, name
        assert current.get_attribute("href") == path, name
        # The navigation fits: "Sign out" is on screen, not past the right edge.
        sign_out = page.get_by_role("button", name="Sign out", exact=True).bounding_box()
        assert sign_out is not None and sign_out["x"] + sign_out["width"] <= width, name
    for name, (path, nav) in SUB_PAGES.items():
        response = page.goto(path)
        assert response is not None and response.status == 200, (name, page.url)
        problems += _audit(page, name, screens, width, scheme)
        assert page.locator('nav a[aria-current="page"]').get_attribute("href") == nav, name

    # The policy preview and the authenticator reset are pages of their own, after a POST.
    page.goto("/portal/policy")
    page.fill("#rule", "*.example.net")
    page.get_by_role("button", name="Preview", exact=True).click()
    page.wait_for_selector("#preview")
    problems += _audit(page, "policy-preview", screens, width, scheme)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("width", "scheme"), [(390, "light"), (1280, "light"), (1280, "dark")])
def test_signed_out_pages_and_enrolment_fit_and_are_accessible(
    open_context: Callable[..., BrowserContext], screens: Path, width: int, scheme: str
) -> None:
    page = open_context(width, scheme).new_page()
    problems: list[str] = []
    for name, path in SIGNED_OUT_PAGES.items():
        page.goto(path)
        problems += _audit(page, name, screens, width, scheme)
        assert page.locator("nav").count() == 0  # nothing to navigate to before signing in
    page.goto("/portal/sign-up")
    page.fill("input[name=email]", f"layout-{secrets.token_hex(4)}@example.com")
    page.fill("input[name=password]", PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create account").click()
    page.wait_for_selector("#totp-secret")
    problems += _audit(page, "enrol", screens, width, scheme)
    assert not problems, "\n".join(problems)


def test_focus_is_visible_and_the_activity_filters_sit_with_their_labels(
    holder_with_history: Holder, open_context: Callable[..., BrowserContext]
) -> None:
    context = open_context(1280)
    context.add_cookies(holder_with_history.cookies)  # type: ignore[arg-type]
    page = context.new_page()
    page.goto("/portal/activity")
    page.keyboard.press("Tab")
    focused = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return [document.activeElement.tagName, s.outlineStyle, parseFloat(s.outlineWidth)]; }"
    )
    assert focused[0] == "A" and focused[1] != "none" and focused[2] >= 2, focused

    # Each label directly above its own control, left edges aligned (not in another cell).
    for control in ("f-decision", "f-seller", "f-network", "f-sandbox", "f-from", "f-to"):
        label = page.locator(f'label[for="{control}"]').bounding_box()
        box = page.locator(f"#{control}").bounding_box()
        assert label is not None and box is not None
        assert abs(label["x"] - box["x"]) < 1, control
        gap = box["y"] - (label["y"] + label["height"])
        assert 0 <= gap < 16, (control, gap)


def test_the_portal_stylesheet_is_its_own_file_and_the_policy_allows_only_it(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    page = signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    assert '<link rel="stylesheet" href="/portal/static/portal.css">' in page.text
    assert "<style" not in page.text and " style=" not in page.text
    csp = dict(d.strip().split(" ", 1) for d in page.headers["content-security-policy"].split(";"))
    assert csp["style-src"] == "'self'"
    sheet = browser.get("/portal/static/portal.css")
    assert sheet.status_code == 200
    assert sheet.headers["content-type"] == "text/css; charset=utf-8"
    assert sheet.headers["x-content-type-options"] == "nosniff"
    assert "prefers-color-scheme: dark" in sheet.text and ":focus-visible" in sheet.text
    # No stylesheet from elsewhere: nothing outside the portal is fetched by its pages.
    assert "http" not in sheet.text.split("*/", 1)[1]


def test_an_injected_inline_style_is_not_applied(
    holder_with_history: Holder, open_context: Callable[..., BrowserContext]
) -> None:
    """The policy keeps markup from restyling a page: a ``style`` attribute, as injected HTML
    would carry, is refused by the browser."""
    context = open_context(1280)
    context.add_cookies(holder_with_history.cookies)  # type: ignore[arg-type]
    page = context.new_page()
    page.goto("/portal/")
    applied = page.evaluate(
        "() => { const d = document.createElement('div');"
        ' d.innerHTML = \'<p id="injected" style="display:none">x</p>\';'
        " document.querySelector('main').append(d);"
        " return getComputedStyle(document.getElementById('injected')).display; }"
    )
    assert applied != "none"
