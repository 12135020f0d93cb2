"""Every page a holder sees refuses to be framed (clickjacking), is never cached, and runs no
script but the portal's own: checked on each page, signed in and out, and on the OAuth pages."""

from __future__ import annotations

import httpx
import pytest

from conftest import FrozenClock
from paysign.services import accounts
from portal.conftest import signed_in

SIGNED_OUT = ["/portal/sign-in", "/portal/sign-up", "/oauth/login?txn=unknown"]
SIGNED_IN = [
    "/portal/",
    "/portal/connect",
    "/portal/activity",
    "/portal/activity.csv",
    "/portal/keys",
    "/portal/approvals",
    "/portal/policy",
    "/portal/settings",
]


def _assert_guarded(response: httpx.Response) -> None:
    headers = response.headers
    assert headers["x-frame-options"] == "DENY", response.url
    csp = headers["content-security-policy"]
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives["frame-ancestors"] == ["'none'"], response.url
    assert directives["default-src"] == ["'none'"], response.url
    assert "'unsafe-inline'" not in directives.get("script-src", []), response.url
    if response.url.path.startswith("/portal"):
        # The portal's own stylesheet, nothing inline: markup cannot restyle a page.
        assert directives["style-src"] == ["'self'"], response.url
        assert directives["script-src"] == ["'self'"], response.url
    assert headers["cache-control"] == "no-store", response.url
    assert headers["referrer-policy"] == "no-referrer", response.url


@pytest.mark.parametrize("path", SIGNED_OUT)
def test_signed_out_pages_cannot_be_framed(browser: httpx.Client, path: str) -> None:
    response = browser.get(path)
    assert response.status_code in (200, 400), response.text
    _assert_guarded(response)


def test_signed_in_pages_cannot_be_framed(
    browser: httpx.Client, holder: accounts.CreatedAccount, clock: FrozenClock
) -> None:
    signed_in(browser, holder, clock)
    for path in SIGNED_IN:
        response = browser.get(path)
        assert response.status_code == 200, (path, response.text)
        _assert_guarded(response)


def test_a_refused_form_cannot_be_framed_either(browser: httpx.Client) -> None:
    refused = browser.post("/portal/sign-in", data={"csrf": "forged", "email": "a@b.example"})
    assert refused.status_code == 403
    _assert_guarded(refused)
