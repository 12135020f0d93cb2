"""The authenticator QR code, on the enrolment page after sign-up and on the authenticator-reset
page: inline SVG drawn on the server, encoding exactly the ``otpauth://`` URI shown beside it.

The expected modules come from the ``qrcode`` library itself, computed here from the URI read
off the page, and are compared with the squares the SVG draws."""

from __future__ import annotations

import html
import re
import secrets
from urllib.parse import parse_qs, urlsplit

import httpx
import qrcode
import qrcode.constants
from playwright.sync_api import Browser, expect

from conftest import FrozenClock, LiveServer
from paysign.bootstrap import Runtime
from paysign.services import accounts
from portal.conftest import PASSWORD, code, csrf_of, secret_of, sign_in


def _expected_modules(uri: str) -> tuple[int, set[tuple[int, int]]]:
    """The matrix size and dark modules of ``uri`` as a QR code (error correction M, the
    standard 4-module quiet zone)."""
    qr = qrcode.QRCode(error_correction=qrcode.constants.ERROR_CORRECT_M, border=4)
    qr.add_data(uri)
    qr.make(fit=True)
    matrix = qr.get_matrix()
    dark = {(x, y) for y, row in enumerate(matrix) for x, cell in enumerate(row) if cell}
    return len(matrix), dark


def _assert_qr_encodes_the_uri(page: httpx.Response) -> str:
    secret = secret_of(page)
    shown = re.search(r'id="otpauth-uri">([^<]+)<', page.text)
    assert shown, page.text
    uri = html.unescape(shown.group(1))
    parts = urlsplit(uri)
    assert parts.scheme == "otpauth" and parts.netloc == "totp"
    assert parse_qs(parts.query)["secret"] == [secret]

    figure = re.search(r'<figure id="totp-qr">(<svg .*?</svg>)</figure>', page.text, re.S)
    assert figure, page.text
    svg = figure.group(1)
    assert 'role="img"' in svg and "aria-label=" in svg
    size, dark = _expected_modules(uri)
    assert f'viewBox="0 0 {size} {size}"' in svg
    path = re.search(r'<path fill="#000" d="([^"]*)"', svg)
    assert path
    drawn = [(int(x), int(y)) for x, y in re.findall(r"M(\d+),(\d+)h1v1h-1z", path.group(1))]
    assert "".join(f"M{x},{y}h1v1h-1z" for x, y in drawn) == path.group(1)  # nothing else
    assert len(drawn) == len(set(drawn)) and set(drawn) == dark
    return uri


def test_enrolment_page_shows_the_uri_as_a_qr_code(browser: httpx.Client, runtime: Runtime) -> None:
    form = browser.get("/portal/sign-up")
    email = f"qr-{secrets.token_hex(4)}@example.com"
    enrol = browser.post(
        "/portal/sign-up", data={"csrf": csrf_of(form), "email": email, "password": PASSWORD}
    )
    assert enrol.status_code == 200, enrol.text
    uri = _assert_qr_encodes_the_uri(enrol)
    assert uri.startswith("otpauth://totp/paysign:") and "issuer=paysign" in uri
    # The SVG is inline markup: the strict CSP (no img-src) does not block it.
    assert "default-src 'none'" in enrol.headers["content-security-policy"]
    assert "<img" not in enrol.text and "data:image" not in enrol.text


def test_authenticator_reset_page_shows_the_new_uri_as_a_qr_code(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    assert (
        sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock)).status_code == 303
    )
    csrf = csrf_of(browser.get("/portal/settings"))
    clock.advance(30)
    page = browser.post(
        "/portal/settings/authenticator",
        data={"csrf": csrf, "current": PASSWORD, "totp": code(holder.totp_secret, clock)},
    )
    assert page.status_code == 200, page.text
    uri = _assert_qr_encodes_the_uri(page)
    assert f"secret={holder.totp_secret}" not in uri  # the new secret, not the current one


def test_the_secret_is_shown_in_fours_and_copied_whole(
    chromium: Browser, server: LiveServer
) -> None:
    """Groups of four for the eye; the copy button gives the app the secret without spaces,
    and the app's codes check out against it."""
    context = chromium.new_context(base_url=server.url)
    try:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        page = context.new_page()
        page.goto("/portal/sign-up")
        page.fill("input[name=email]", f"copy-{secrets.token_hex(4)}@example.com")
        page.fill("input[name=password]", PASSWORD)
        with page.expect_navigation():
            page.get_by_role("button", name="Create account").click()
        shown = page.locator("#totp-secret").inner_text().strip()
        assert re.fullmatch(r"([A-Z2-7]{4} )+[A-Z2-7]{1,4}", shown), shown
        page.get_by_role("button", name="Copy the secret").click()
        expect(page.locator("#secret-copy-status")).to_have_text("Copied.")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == shown.replace(" ", "")
        uri = page.locator("#otpauth-uri").inner_text()
        assert parse_qs(urlsplit(uri).query)["secret"] == [copied]
    finally:
        context.close()
