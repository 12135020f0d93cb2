"""The Connect page lists the assistants connected with OAuth, each with a button that revokes
that one alone (every sign-in of its client, of this account only); real OAuth flows against a
served app, the revoked tokens tried on the MCP connector."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect

from oauth import conftest as oauth_support
from oauth.conftest import PASSWORD, Service, User, register
from oauth.test_oauth import exchanged_code, is_invalid_token, mcp_post
from paysign.services import accounts
from portal.conftest import csrf_of, error_of, redirected, sign_in

# The OAuth tests' app (on the address its settings name) and account, as fixtures here too.
service = oauth_support.service
user = oauth_support.user

AUDIT = (Path(__file__).parent / "page_audit.js").read_text()


def _grant(service: Service, user: User, client: dict[str, Any]) -> str:
    """One sign-in of ``user`` through ``client`` (the code flow by hand); its access token."""
    service.clock.advance(30)  # each sign-in takes a fresh authenticator code
    answer = exchanged_code(service, user, client)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def _works(service: Service, token: str) -> bool:
    return not is_invalid_token(mcp_post(service, token))


@contextmanager
def _portal(service: Service, user: User) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=10) as browser:
        service.clock.advance(30)
        assert sign_in(browser, user.email, PASSWORD, user.code(service.clock)).status_code == 303
        yield browser


def _listed(page: httpx.Response) -> dict[str, str]:
    """Client id -> the name shown, for each assistant the page lists."""
    rows = re.findall(
        r'class="assistant-name">([^<]*)</strong>\s*<br><span class="hint mono">([^<]+)</span>',
        page.text,
    )
    return {client_id: unescape(name) for name, client_id in rows}


class TwoAssistants:
    """``alpha`` signed in twice, ``beta`` (a name with markup in it) once."""

    def __init__(self, service: Service, user: User) -> None:
        self.alpha = register(service, client_name="Alpha Assistant").json()
        self.beta = register(service, client_name="<b>Beta</b> bot").json()
        self.alpha_tokens = [_grant(service, user, self.alpha) for _ in range(2)]
        self.beta_token = _grant(service, user, self.beta)


def test_each_assistant_is_listed_and_revoked_alone(service: Service, user: User) -> None:
    both = TwoAssistants(service, user)
    with _portal(service, user) as browser:
        page = browser.get("/portal/connect")
        assert page.status_code == 200
        assert _listed(page) == {
            both.alpha["client_id"]: "Alpha Assistant",
            both.beta["client_id"]: "<b>Beta</b> bot",
        }
        assert "&lt;b&gt;Beta&lt;/b&gt; bot" in page.text  # the client's name is text
        assert '<td data-label="Sign-ins">2</td>' in page.text
        assert page.text.count('action="/portal/connect/assistants"') == 2

        sent = browser.post(
            "/portal/connect/assistants",
            data={"csrf": csrf_of(page), "client": both.alpha["client_id"]},
        )
        done = redirected(browser, sent, "/portal/connect")
        assert "Assistant revoked: 2 sign-in(s) ended." in done.text
        assert _listed(done) == {both.beta["client_id"]: "<b>Beta</b> bot"}
    assert not any(_works(service, token) for token in both.alpha_tokens)
    assert _works(service, both.beta_token)


def test_nothing_connected_says_so(service: Service, user: User) -> None:
    with _portal(service, user) as browser:
        page = browser.get("/portal/connect")
        assert "No assistant is connected with OAuth now." in page.text
        assert 'action="/portal/connect/assistants"' not in page.text


@pytest.fixture
def other_user(service: Service) -> User:
    rt = service.runtime
    created = accounts.create_account(
        rt.db, rt.vault, rt.clock, email="someone-else@example.com", password=PASSWORD
    )
    return User(created.email, created.account_id, created.totp_secret)


def test_revoking_another_accounts_assistant_changes_nothing(
    service: Service, user: User, other_user: User
) -> None:
    """The form names a client id; one of another account's assistants (or a forged form, or
    no id at all, which must not mean "every assistant") disconnects nothing."""
    mine = register(service, client_name="Mine").json()
    my_token = _grant(service, user, mine)
    theirs = register(service, client_name="Theirs").json()
    their_token = _grant(service, other_user, theirs)
    with _portal(service, user) as browser:
        page = browser.get("/portal/connect")
        for client, status in (
            (theirs["client_id"], 404),
            ("", 400),
            ("x" * 65, 400),
        ):
            refused = browser.post(
                "/portal/connect/assistants", data={"csrf": csrf_of(page), "client": client}
            )
            assert refused.status_code == status, client
            assert error_of(refused).endswith("nothing was changed.")
        forged = browser.post(
            "/portal/connect/assistants", data={"csrf": "forged", "client": mine["client_id"]}
        )
        assert forged.status_code == 403
        assert _listed(browser.get("/portal/connect")) == {mine["client_id"]: "Mine"}
    assert _works(service, my_token) and _works(service, their_token)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("width", [390, 1280])
def test_revoke_in_a_real_browser(
    service: Service,
    user: User,
    chromium: Browser,
    tmp_path_factory: pytest.TempPathFactory,
    width: int,
) -> None:
    """At a phone's and a desktop's width the list fits the window and its button revokes the
    assistant it names (screenshots are written to the printed folder)."""
    both = TwoAssistants(service, user)
    folder = tmp_path_factory.mktemp("connect-screens")
    print(f"connect screenshots: {folder}")
    with _portal(service, user) as signed:
        cookies = [
            {"name": c.name, "value": c.value or "", "url": service.url} for c in signed.cookies.jar
        ]
    context = chromium.new_context(base_url=service.url, viewport={"width": width, "height": 900})
    try:
        context.add_cookies(cookies)  # type: ignore[arg-type]
        page = context.new_page()
        page.goto("/portal/connect")
        page.screenshot(path=folder / f"connect-{width}.png", full_page=True)
        assert page.evaluate(AUDIT) == []
        with page.expect_navigation():
            page.get_by_role("button", name="Revoke <b>Beta</b> bot", exact=True).click()
        expect(page.get_by_text("Assistant revoked: 1 sign-in(s) ended.")).to_be_visible()
        expect(
            page.get_by_role("button", name="Revoke Alpha Assistant", exact=True)
        ).to_be_visible()
        expect(page.locator(".assistant-name", has_text="Beta")).to_have_count(0)
        page.screenshot(path=folder / f"connect-after-{width}.png", full_page=True)
        assert page.evaluate(AUDIT) == []
    finally:
        context.close()
    assert not _works(service, both.beta_token)
    assert all(_works(service, token) for token in both.alpha_tokens)
