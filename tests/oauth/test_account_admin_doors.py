"""The operator's account commands at the OAuth and portal doors, over real HTTP: a disabled
account's access and refresh tokens are refused and its browser sessions end, and come back
on enable; an authenticator reset revokes every grant and session."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from oauth.conftest import PASSWORD, Service, User
from oauth.test_oauth import is_invalid_token, mcp_post, refresh, tokens_for
from paysign.services import account_admin
from portal.conftest import sign_in


@contextmanager
def _signed_in_browser(service: Service, user: User) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=10) as browser:
        service.clock.advance(30)  # a code no earlier sign-in used
        assert sign_in(browser, user.email, PASSWORD, user.code(service.clock)).status_code == 303
        assert browser.get("/portal/", follow_redirects=False).status_code == 200
        yield browser


def test_a_disabled_accounts_tokens_and_sessions_are_refused(service: Service, user: User) -> None:
    rt = service.runtime
    client, tokens = tokens_for(service, user)
    assert not is_invalid_token(mcp_post(service, tokens["access_token"]))
    with _signed_in_browser(service, user) as browser:
        done = account_admin.disable_account(rt.db, rt.clock, email=user.email)
        assert done.changed and done.sessions_ended == 1

        assert is_invalid_token(mcp_post(service, tokens["access_token"]))
        assert refresh(service, client, tokens["refresh_token"]).status_code == 400
        assert browser.get("/portal/", follow_redirects=False).status_code in (302, 303)

        service.clock.advance(30)
        refused = sign_in(browser, user.email, PASSWORD, user.code(service.clock))
        assert refused.status_code == 401 and "This account is disabled" in refused.text
        # A wrong password learns nothing about the account's state.
        service.clock.advance(30)
        wrong = sign_in(browser, user.email, "not the password", user.code(service.clock))
        assert wrong.status_code == 401 and "disabled" not in wrong.text

    assert account_admin.enable_account(rt.db, email=user.email)
    # Nothing was deleted: the same grant works again.
    assert not is_invalid_token(mcp_post(service, tokens["access_token"]))
    assert refresh(service, client, tokens["refresh_token"]).status_code == 200


def test_resetting_the_authenticator_revokes_grants_and_sessions(
    service: Service, user: User
) -> None:
    rt = service.runtime
    client, tokens = tokens_for(service, user)
    with _signed_in_browser(service, user) as browser:
        reset = account_admin.reset_authenticator(rt.db, rt.vault, rt.clock, email=user.email)
        assert reset.sessions_ended == 1 and reset.grants_revoked == 1
        assert browser.get("/portal/", follow_redirects=False).status_code in (302, 303)
    assert is_invalid_token(mcp_post(service, tokens["access_token"]))
    assert refresh(service, client, tokens["refresh_token"]).status_code == 400

    with httpx.Client(base_url=service.url, timeout=10) as browser:
        service.clock.advance(30)
        old = sign_in(browser, user.email, PASSWORD, user.code(service.clock))
        assert old.status_code == 401
        service.clock.advance(30)
        user.totp_secret = reset.totp_secret
        assert sign_in(browser, user.email, PASSWORD, user.code(service.clock)).status_code == 303
