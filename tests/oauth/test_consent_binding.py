"""A consent link is only good in the browser that signed in: an attacker who starts an
authorization request and sends the victim its sign-in link cannot approve it after the victim
signs in, with or without the consent form's CSRF token (real HTTP, both databases)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import sqlalchemy as sa

from conftest import FrozenClock, LiveServer, free_port
from paysign.bootstrap import Runtime
from paysign.services import accounts
from paysign.store.schema import oauth_codes

from .conftest import PASSWORD, REDIRECT, Browser, Service, User, hidden, pkce, register
from .test_oauth import authorization_url

ATTACKER_REDIRECT = "https://attacker.example/cb"


def _codes_issued(service: Service) -> int:
    with service.runtime.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(oauth_codes)).scalar_one())


def _attacker_starts(service: Service) -> tuple[str, str, str]:
    """A public client of the attacker's and a request with the attacker's own PKCE challenge;
    returns (client id, verifier, the sign-in link sent to the victim)."""
    client = register(
        service, redirect_uris=[ATTACKER_REDIRECT], token_endpoint_auth_method="none"
    ).json()
    verifier, challenge = pkce()
    url = authorization_url(service, client["client_id"], challenge, redirect_uri=ATTACKER_REDIRECT)
    r = httpx.get(url)
    assert r.status_code == 302, r.text
    return client["client_id"], verifier, r.headers["location"]


def _victim_signs_in(service: Service, user: User, victim: httpx.Client, link: str) -> str:
    page = victim.get(link)
    assert page.status_code == 200
    signed = Browser(service, user).sign_in(victim, link, page.text)
    assert signed.status_code == 303, signed.text
    return str(signed.headers["location"])


def _consent_post(http: httpx.Client, service: Service, consent: str, csrf: str) -> httpx.Response:
    return http.post(
        service.url + consent.split("?")[0],
        data={
            "txn": parse_qs(urlsplit(consent).query)["txn"][0],
            "csrf": csrf,
            "decision": "approve",
        },
    )


def test_consent_without_the_sign_in_cookie_is_refused(service: Service, user: User) -> None:
    client_id, verifier, link = _attacker_starts(service)
    with httpx.Client(timeout=10) as victim:
        consent = _victim_signs_in(service, user, victim, link)
        with httpx.Client(timeout=10) as attacker:
            # The attack as reported: no cookie, read the CSRF token off the page, approve.
            page = attacker.get(service.url + consent)
            assert page.status_code == 403, page.text
            assert 'name="csrf"' not in page.text and "location" not in page.headers
            assert "same browser" in page.text
            # Even holding the real CSRF token (read from the victim's page) gets nothing.
            csrf = hidden(victim.get(service.url + consent).text, "csrf")
            posted = _consent_post(attacker, service, consent, csrf)
            assert posted.status_code == 403, posted.text
            assert "location" not in posted.headers and "code=" not in posted.text
            # A made-up cookie of the right name is no better.
            for name in victim.cookies:
                attacker.cookies.set(name, secrets.token_urlsafe(32), path="/oauth")
            assert attacker.get(service.url + consent).status_code == 403
            assert _consent_post(attacker, service, consent, csrf).status_code == 403
        assert _codes_issued(service) == 0
        # The victim's own browser still completes the request the refusals left alone.
        target = Browser(service, user).approve(victim, consent)
    assert target.startswith(ATTACKER_REDIRECT) and "code=" in target
    code = parse_qs(urlsplit(target).query)["code"][0]
    r = httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": ATTACKER_REDIRECT,
            "code_verifier": verifier,
            "client_id": client_id,
        },
    )
    assert r.status_code == 200, r.text


def test_another_sign_in_cookie_does_not_open_the_victims_consent(
    service: Service, user: User
) -> None:
    """The attacker signs in to a request of its own (its own account, a valid cookie) and
    presents that cookie's value for the victim's request."""
    rt = service.runtime
    email = f"attacker-{secrets.token_hex(4)}@example.com"
    made = accounts.create_account(rt.db, rt.vault, rt.clock, email=email, password=PASSWORD)
    attacker_user = User(email, made.account_id, made.totp_secret)
    _, _, victim_link = _attacker_starts(service)
    _, _, own_link = _attacker_starts(service)
    with httpx.Client(timeout=10) as victim, httpx.Client(timeout=10) as attacker:
        consent = _victim_signs_in(service, user, victim, victim_link)
        _victim_signs_in(service, attacker_user, attacker, own_link)
        (own_value,) = [cookie.value for cookie in attacker.cookies.jar]
        for name in victim.cookies:
            attacker.cookies.set(name, own_value or "", path="/oauth")
        assert attacker.get(service.url + consent).status_code == 403
        csrf = hidden(victim.get(service.url + consent).text, "csrf")
        assert _consent_post(attacker, service, consent, csrf).status_code == 403
    assert _codes_issued(service) == 0


def test_the_login_response_sets_the_sign_in_cookie(service: Service, user: User) -> None:
    _, _, link = _attacker_starts(service)
    with httpx.Client(timeout=10) as victim:
        page = victim.get(link)
        assert "set-cookie" not in page.headers  # only signing in binds the request
        signed = Browser(service, user).sign_in(victim, link, page.text)
    assert signed.status_code == 303
    (header,) = signed.headers.get_list("set-cookie")
    attributes = header.lower()
    assert "httponly" in attributes and "samesite=lax" in attributes and "path=/oauth" in attributes
    assert "secure" not in attributes  # the issuer here is http://127.0.0.1
    (morsel,) = SimpleCookie(header).values()
    assert len(morsel.value) >= 40  # random, not derived from the transaction id


def test_a_signed_in_request_cannot_be_signed_in_again(service: Service, user: User) -> None:
    """After the victim signs in, the login page no longer hands out a form (whose token would
    let someone else re-bind the request to another browser)."""
    _, _, link = _attacker_starts(service)
    with httpx.Client(timeout=10) as victim:
        login_page = victim.get(link).text
        consent = _victim_signs_in(service, user, victim, link)
        with httpx.Client(timeout=10) as attacker:
            again = attacker.get(link)
            assert again.status_code == 303 and again.headers["location"] == consent
            # Even with the request's current token, signing in again is refused.
            csrf = hidden(victim.get(service.url + consent).text, "csrf")
            forged = login_page.replace(hidden(login_page, "csrf"), csrf)
            service.clock.advance(30)
            replay = Browser(service, user).sign_in(
                attacker, link, forged, code=user.code(service.clock)
            )
            assert replay.status_code == 400 and "set-cookie" not in replay.headers
        assert Browser(service, user).approve(victim, consent).startswith(ATTACKER_REDIRECT)


def test_deny_also_needs_the_cookie(service: Service, user: User) -> None:
    _, _, link = _attacker_starts(service)
    with httpx.Client(timeout=10) as victim:
        consent = _victim_signs_in(service, user, victim, link)
        csrf = hidden(victim.get(service.url + consent).text, "csrf")
        with httpx.Client(timeout=10) as attacker:
            r = attacker.post(
                service.url + consent.split("?")[0],
                data={
                    "txn": parse_qs(urlsplit(consent).query)["txn"][0],
                    "csrf": csrf,
                    "decision": "deny",
                },
            )
            assert r.status_code == 403 and "location" not in r.headers
        # The victim's request was not consumed by the refused denial.
        assert Browser(service, user).approve(victim, consent).startswith(ATTACKER_REDIRECT)


# ---- an https issuer: the cookie is Secure ----


@pytest.fixture
def https_service(runtime: Runtime, clock: FrozenClock) -> Iterator[Service]:
    """The app behind a TLS-terminating proxy: issuer ``https://paysign.example/oauth``, the
    app itself on plain HTTP here."""
    from paysign.app import create_app

    port = free_port()
    settings = runtime.settings.model_copy(
        update={"port": port, "auth_url": "https://paysign.example/oauth"}
    )
    runtime = dataclasses.replace(runtime, settings=settings)
    with LiveServer(create_app(runtime), port) as server:
        yield Service(server.url, runtime, clock)


def test_an_https_issuer_sets_a_secure_cookie(https_service: Service, user: User) -> None:
    service = https_service
    client = httpx.post(
        service.url + "/oauth/register",
        json={"client_name": "Test Assistant", "redirect_uris": [REDIRECT]},
    ).json()
    r = httpx.get(
        authorization_url(service, client["client_id"], pkce()[1]).replace(
            service.auth_url, service.url + "/oauth"
        )
    )
    assert r.status_code == 302, r.text
    link = r.headers["location"]
    assert link.startswith("https://paysign.example/oauth/login?txn=")
    local = service.url + link.removeprefix("https://paysign.example")
    with httpx.Client(timeout=10) as browser:
        page = browser.get(local)
        signed = Browser(service, user).sign_in(browser, local, page.text)
    assert signed.status_code == 303, signed.text
    (header,) = signed.headers.get_list("set-cookie")
    assert header.startswith("__Secure-")
    assert "; secure" in header.lower() and "path=/oauth" in header.lower()


def test_no_code_for_a_client_that_expired_meanwhile(service: Service, user: User) -> None:
    """A client never granted a code expires a day after registering; a request it started
    just before then gets no code (there is no registered redirect to send it to)."""
    from paysign.services.oauth_clients import RegistrationLimits

    client = register(service).json()
    service.clock.advance(RegistrationLimits().ungranted_ttl - 60)
    r = httpx.get(authorization_url(service, client["client_id"], pkce()[1]))
    assert r.status_code == 302, r.text
    with httpx.Client(timeout=10) as victim:
        consent = _victim_signs_in(service, user, victim, r.headers["location"])
        service.clock.advance(61)
        assert register(service).status_code == 201  # which purges the expired client
        csrf = hidden(victim.get(service.url + consent).text, "csrf")
        posted = _consent_post(victim, service, consent, csrf)
    assert posted.status_code == 400 and "location" not in posted.headers
    assert _codes_issued(service) == 0
