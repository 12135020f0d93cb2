"""A redirect URI with a user name or password is refused. The consent page names where the
browser goes; with ``https://claude.ai@evil.example/cb`` it said "claude.ai@evil.example" while
the browser, and the code, went to evil.example."""

from __future__ import annotations

import contextlib
import json

import httpx
import pytest

from paysign.store import oauth_repo

from .conftest import Browser, Service, User, pkce, register
from .test_oauth import authorization_url

DISGUISED = [
    "https://claude.ai@evil.example/oauth/callback",
    "https://claude.ai:443@evil.example/cb",
    "https://user:pass@client.example/cb",
]


@pytest.mark.parametrize("redirect", DISGUISED)
def test_registration_refuses_a_redirect_uri_with_credentials(
    service: Service, redirect: str
) -> None:
    refused = register(service, redirect_uris=[redirect])
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_redirect_uri"
    assert "user name or password" in refused.json()["error_description"]


def test_a_client_stored_with_one_gets_no_consent_page(service: Service, user: User) -> None:
    """A client registered before the rule: its authorization request is refused, and the
    sign-in never reaches a consent page naming the disguised host."""
    disguised = DISGUISED[0]
    with service.runtime.db.write() as conn:
        oauth_repo.insert_client(
            conn,
            "stored-before",
            json.dumps(
                {
                    "client_id": "stored-before",
                    "client_name": "Claude",
                    "redirect_uris": [disguised],
                    "token_endpoint_auth_method": "none",
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                }
            ),
            "0" * 64,
            service.clock.now(),
        )
    _, challenge = pkce()
    url = authorization_url(service, "stored-before", challenge, redirect_uri=disguised)
    with contextlib.closing(httpx.Client(timeout=10)) as http:
        answer = http.get(url)
    assert answer.status_code == 400, answer.text
    assert "location" not in answer.headers
    assert "user name or password" in answer.json()["error_description"]


def test_the_consent_page_names_the_host_the_browser_goes_to(service: Service, user: User) -> None:
    redirect = "https://client.example:8443/oauth/callback"
    client = register(service, redirect_uris=[redirect]).json()
    _, challenge = pkce()
    browser = Browser(service, user)
    with contextlib.closing(httpx.Client(timeout=10)) as http:
        login, page = browser.open_login(
            http,
            authorization_url(service, client["client_id"], challenge, redirect_uri=redirect),
        )
        signed_in = browser.sign_in(http, login, page)
        assert signed_in.status_code == 303, signed_in.text
        consent = http.get(service.url + signed_in.headers["location"])
    assert '<span class="host">client.example:8443</span>' in consent.text
