"""A changed credential disconnects every assistant: OAuth grants made before a password change
or an authenticator reset stop working, and the settings page can disconnect them on demand."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pyotp

from oauth.conftest import PASSWORD, Browser, Service, User, hidden, pkce, register
from oauth.test_oauth import (
    authorization_url,
    exchange,
    is_invalid_token,
    mcp_post,
    refresh,
    tokens_for,
)
from portal.conftest import csrf_of, redirected, secret_of, sign_in

NEW_PASSWORD = "another long passphrase"


@contextmanager
def _portal(service: Service, user: User) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=10) as browser:
        service.clock.advance(30)  # a code not used by the OAuth sign-in
        assert sign_in(browser, user.email, PASSWORD, user.code(service.clock)).status_code == 303
        yield browser


def _assistants(page: httpx.Response) -> int:
    found = re.search(r'<p id="assistants">(\d+) assistant', page.text)
    assert found, page.text
    return int(found.group(1))


def test_changing_the_password_disconnects_every_assistant(service: Service, user: User) -> None:
    first_client, first = tokens_for(service, user)
    service.clock.advance(30)
    _, second = tokens_for(service, user)
    assert not is_invalid_token(mcp_post(service, first["access_token"]))
    with _portal(service, user) as browser:
        page = browser.get("/portal/settings")
        assert _assistants(page) == 2
        changed = redirected(browser, _new_password(service, user, browser), "/portal/settings")
        assert "2 connected assistant(s) disconnected" in changed.text
        assert _assistants(changed) == 0
    for tokens in (first, second):
        assert is_invalid_token(mcp_post(service, tokens["access_token"]))
    assert refresh(service, first_client, first["refresh_token"]).status_code == 400


def test_a_wrong_code_disconnects_nothing(service: Service, user: User) -> None:
    _, tokens = tokens_for(service, user)
    with _portal(service, user) as browser:
        page = browser.get("/portal/settings")
        refused = browser.post(
            "/portal/settings/password",
            data={
                "csrf": csrf_of(page),
                "current": PASSWORD,
                "new": NEW_PASSWORD,
                "totp": user.code(service.clock),  # the code just used to sign in
            },
        )
        assert refused.status_code == 401
        assert _assistants(refused) == 1
    assert not is_invalid_token(mcp_post(service, tokens["access_token"]))


def test_resetting_the_authenticator_disconnects_every_assistant(
    service: Service, user: User
) -> None:
    _, tokens = tokens_for(service, user)
    with _portal(service, user) as browser:
        page = browser.get("/portal/settings")
        service.clock.advance(30)
        started = browser.post(
            "/portal/settings/authenticator",
            data={"csrf": csrf_of(page), "current": PASSWORD, "totp": user.code(service.clock)},
        )
        assert started.status_code == 200
        secret = secret_of(started)
        token = re.search(r'name="token" value="([^"]+)"', started.text)
        assert token, started.text
        assert not is_invalid_token(mcp_post(service, tokens["access_token"]))  # not yet
        confirmed = browser.post(
            "/portal/settings/authenticator/confirm",
            data={
                "csrf": csrf_of(page),
                "token": token.group(1),
                "totp": pyotp.TOTP(secret).at(service.clock.now()),
            },
        )
        confirmed = redirected(browser, confirmed, "/portal/settings")
        assert "1 connected assistant(s) disconnected" in confirmed.text
    assert is_invalid_token(mcp_post(service, tokens["access_token"]))


def test_disconnect_every_assistant_on_demand(service: Service, user: User) -> None:
    _, tokens = tokens_for(service, user)
    with _portal(service, user) as browser:
        page = browser.get("/portal/settings")
        assert browser.post("/portal/settings/assistants", data={"csrf": "x"}).status_code == 403
        assert not is_invalid_token(mcp_post(service, tokens["access_token"]))
        sent = browser.post("/portal/settings/assistants", data={"csrf": csrf_of(page)})
        done = redirected(browser, sent, "/portal/settings")
        assert "1 connected assistant(s) disconnected" in done.text
        assert _assistants(done) == 0
        assert 'action="/portal/settings/assistants"' not in done.text
    assert is_invalid_token(mcp_post(service, tokens["access_token"]))


def _approve_held(browser: httpx.Client, consent: str, held: httpx.Response) -> httpx.Response:
    """Approve on the consent page ``held`` open since before."""
    return browser.post(
        consent.split("?")[0],
        data={
            "txn": hidden(held.text, "txn"),
            "csrf": hidden(held.text, "csrf"),
            "decision": "approve",
        },
    )


def _new_password(service: Service, user: User, browser: httpx.Client) -> httpx.Response:
    """The settings form changing the password, with a fresh code."""
    page = browser.get("/portal/settings")
    service.clock.advance(30)
    return browser.post(
        "/portal/settings/password",
        data={
            "csrf": csrf_of(page),
            "current": PASSWORD,
            "new": NEW_PASSWORD,
            "totp": user.code(service.clock),
        },
    )


def test_a_sign_in_waiting_at_consent_is_dropped_by_a_password_change(
    service: Service, user: User
) -> None:
    """The attack: signed in with a stolen password and code, the attacker holds the consent
    page open while the holder changes the password, then approves to mint a fresh grant."""
    client = register(service).json()
    _, challenge = pkce()
    browser = Browser(service, user)
    with httpx.Client(timeout=10) as attacker:
        login, page = browser.open_login(
            attacker, authorization_url(service, client["client_id"], challenge)
        )
        signed_in = browser.sign_in(attacker, login, page)
        assert signed_in.status_code == 303
        consent = service.url + signed_in.headers["location"]
        held = attacker.get(consent)
        assert held.status_code == 200

        with _portal(service, user) as holder:
            assert _new_password(service, user, holder).status_code == 303

        approved = _approve_held(attacker, consent, held)
        assert "code=" not in approved.headers.get("location", ""), approved.text
        assert approved.status_code == 400, approved.text


def test_a_code_not_yet_exchanged_is_dropped_by_an_authenticator_reset(
    service: Service, user: User, runtime
) -> None:
    from paysign.services import account_admin

    client = register(service).json()
    verifier, challenge = pkce()
    query = Browser(service, user).authorize(
        authorization_url(service, client["client_id"], challenge)
    )
    account_admin.reset_authenticator(runtime.db, runtime.vault, runtime.clock, email=user.email)
    exchanged = exchange(service, client, query["code"], verifier)
    assert exchanged.status_code == 400, exchanged.text
    assert exchanged.json()["error"] == "invalid_grant"


def test_revoking_one_assistant_drops_its_grants_on_their_way(service: Service, user: User) -> None:
    """The attack: the assistant the holder revokes on the Connect page also holds a code it
    has not exchanged yet and a sign-in waiting at consent; either would connect it again
    right after the revocation. Another assistant's code is not touched. (Each sign-in takes
    a fresh authenticator code, 30 s later; the codes must still be young when exchanged.)"""
    client, tokens = tokens_for(service, user)
    other = register(service).json()
    browser = Browser(service, user)
    with _portal(service, user) as holder, httpx.Client(timeout=10) as assistant:
        service.clock.advance(30)
        login, page = browser.open_login(
            assistant, authorization_url(service, client["client_id"], pkce()[1])
        )
        signed_in = browser.sign_in(assistant, login, page)
        assert signed_in.status_code == 303
        consent = service.url + signed_in.headers["location"]
        held = assistant.get(consent)
        assert held.status_code == 200
        service.clock.advance(30)
        verifier, challenge = pkce()
        unexchanged = browser.authorize(authorization_url(service, client["client_id"], challenge))
        service.clock.advance(30)
        other_verifier, other_challenge = pkce()
        others_code = browser.authorize(
            authorization_url(service, other["client_id"], other_challenge)
        )

        connect = holder.get("/portal/connect")
        sent = holder.post(
            "/portal/connect/assistants",
            data={"csrf": csrf_of(connect), "client": client["client_id"]},
        )
        revoked = redirected(holder, sent, "/portal/connect")
        assert "Assistant revoked: 1 sign-in(s) ended." in revoked.text

        approved = _approve_held(assistant, consent, held)
        assert "code=" not in approved.headers.get("location", ""), approved.text
    assert is_invalid_token(mcp_post(service, tokens["access_token"]))
    exchanged = exchange(service, client, unexchanged["code"], verifier)
    assert exchanged.status_code == 400, exchanged.text
    assert exchanged.json()["error"] == "invalid_grant"
    assert exchange(service, other, others_code["code"], other_verifier).status_code == 200
