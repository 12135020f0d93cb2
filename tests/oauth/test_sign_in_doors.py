"""The OAuth sign-in pages beside the portal: one authenticator code opens one door once, and
a form is read only when it is the size of a form."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from oauth.conftest import PASSWORD, Browser, Service, User, hidden, pkce, register
from oauth.test_oauth import authorization_url


def _login_page(service: Service, user: User) -> tuple[Browser, httpx.Client, str, str]:
    client = register(service).json()
    browser = Browser(service, user)
    http = httpx.Client(timeout=10)
    login, page = browser.open_login(
        http, authorization_url(service, client["client_id"], pkce()[1])
    )
    return browser, http, login, page


def _portal_sign_in(service: Service, user: User, code: str) -> httpx.Response:
    with httpx.Client(base_url=service.url, timeout=10) as portal:
        form = portal.get("/portal/sign-in").text
        return portal.post(
            "/portal/sign-in",
            data={
                "csrf": hidden(form, "csrf"),
                "email": user.email,
                "password": PASSWORD,
                "totp": code,
            },
        )


def test_a_code_used_in_the_portal_does_not_open_an_oauth_sign_in(
    service: Service, user: User
) -> None:
    code = user.code(service.clock)
    assert _portal_sign_in(service, user, code).status_code == 303
    browser, http, login, page = _login_page(service, user)
    with contextlib.closing(http):
        replayed = browser.sign_in(http, login, page, code=code)
        assert replayed.status_code == 401
        assert "consent" not in replayed.headers.get("location", "")
        assert "was already used to sign in" in replayed.text  # not "not correct"


def test_a_code_used_for_oauth_does_not_open_the_portal(service: Service, user: User) -> None:
    code = user.code(service.clock)
    browser, http, login, page = _login_page(service, user)
    with contextlib.closing(http):
        assert browser.sign_in(http, login, page, code=code).status_code == 303
    refused = _portal_sign_in(service, user, code)
    assert refused.status_code == 401
    assert "was already used to sign in" in refused.text


def test_an_oversized_or_unsized_form_is_refused_unread(service: Service, user: User) -> None:
    browser, http, login, page = _login_page(service, user)
    with contextlib.closing(http):
        fields = {"txn": hidden(page, "txn"), "csrf": hidden(page, "csrf")}
        big = http.post(login.split("?")[0], data={**fields, "email": "a" * 20_000})
        assert big.status_code == 413

        def chunks():  # no Content-Length: a body of unknown size
            yield b"txn=" + fields["txn"].encode()
            yield b"&email=" + b"a" * 1000

        chunked = http.post(
            login.split("?")[0],
            content=chunks(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert chunked.status_code == 413
        consent = http.post(
            f"{service.auth_url}/consent", data={**fields, "decision": "a" * 20_000}
        )
        assert consent.status_code == 413
        # The request is untouched: the right form still signs in.
        assert browser.sign_in(http, login, page).status_code == 303


@pytest.mark.parametrize("endpoint", ["authorize", "token", "revoke"])
def test_a_large_form_to_an_open_oauth_endpoint_is_refused_unread(
    service: Service, endpoint: str
) -> None:
    """Without a credential, a form of many fields of up to 1 MB each would be read and held
    whole by Starlette's parser: hundreds of MB per request. Past 64 KiB it is refused."""
    fields = [f"f{n}=" + "x" * 60_000 for n in range(20)]

    def chunks():  # no Content-Length: the size shows only as the body arrives
        for field in fields:
            yield (field + "&").encode()

    url = f"{service.auth_url}/{endpoint}"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for content in (chunks(), "&".join(fields).encode()):
        refused = httpx.post(url, content=content, headers=form, timeout=10)
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"] == "invalid_request"
    small = httpx.post(url, data={"grant_type": "nothing"}, timeout=10)
    assert small.status_code in (302, 400, 401), small.text


@pytest.mark.parametrize("endpoint", ["authorize", "token", "revoke"])
@pytest.mark.parametrize("content_type", ["multipart/form-data", "application/json", None])
def test_a_post_that_is_not_a_form_is_an_invalid_request(
    service: Service, endpoint: str, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    refused = httpx.post(f"{service.auth_url}/{endpoint}", content=b"x", headers=headers)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == "invalid_request"
