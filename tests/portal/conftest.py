"""Shared by the portal tests: the app over real HTTP, an account holder with an authenticator,
and helpers that read forms and compute authenticator codes."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import httpx
import pyotp
import pytest

from conftest import FrozenClock, LiveServer
from paysign.bootstrap import Runtime
from paysign.services import accounts
from portal.browser_support import chromium  # noqa: F401  (a fixture for every browser test)

PASSWORD = "correct horse battery staple"
COOKIE = "paysign_session"


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    from paysign.app import create_app

    with LiveServer(create_app(runtime)) as live:
        yield live


@pytest.fixture
def browser(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        yield client


@pytest.fixture
def holder(runtime: Runtime) -> accounts.CreatedAccount:
    email = f"holder-{secrets.token_hex(4)}@example.com"
    return accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email=email, password=PASSWORD
    )


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


def error_of(page: httpx.Response) -> str:
    found = re.search(r'<p class="error" role="alert">([^<]*)</p>', page.text)
    assert found, page.text
    return found.group(1)


def code(secret: str, clock: FrozenClock) -> str:
    return str(pyotp.TOTP(secret).at(clock.now()))


def sign_in(
    browser: httpx.Client, email: str, password: str, totp: str, *, csrf: str | None = None
) -> httpx.Response:
    if csrf is None:
        csrf = csrf_of(browser.get("/portal/sign-in"))
    return browser.post(
        "/portal/sign-in",
        data={"csrf": csrf, "email": email, "password": password, "totp": totp},
    )


def signed_in(
    browser: httpx.Client, holder: accounts.CreatedAccount, clock: FrozenClock
) -> httpx.Response:
    response = sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock))
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/portal/"
    return browser.get("/portal/")


def secret_of(page: httpx.Response) -> str:
    """The authenticator secret an enrolment page shows (in groups of four), as the app takes it."""
    found = re.search(r'id="totp-secret">([A-Z2-7 ]+)<', page.text)
    assert found, page.text
    return found.group(1).replace(" ", "")


def redirected(browser: httpx.Client, response: httpx.Response, to: str) -> httpx.Response:
    """A form's answer is a 303 to ``to`` (Post/Redirect/Get): the page the browser shows next."""
    assert response.status_code == 303, response.text
    assert response.headers["location"] == to
    return browser.get(to)
