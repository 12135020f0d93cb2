"""Clients that ask for ``offline_access`` (as the MCP SDK does when the server lists it) are
served: every grant has a refresh token anyway."""

from __future__ import annotations

import httpx

from .conftest import REDIRECT, Browser, Service, User, pkce, register
from .test_oauth import authorization_url, mcp_post


def test_offline_access_is_accepted_at_registration_authorization_and_refresh(
    service: Service, user: User
) -> None:
    scope = f"{service.mcp_url}/access offline_access"
    registered = register(service, scope=scope)
    assert registered.status_code == 201, registered.text
    client = registered.json()
    verifier, challenge = pkce()
    query = Browser(service, user).authorize(
        authorization_url(service, client["client_id"], challenge, scope=scope)
    )
    credentials = {"client_id": client["client_id"], "client_secret": client["client_secret"]}
    tokens = httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            **credentials,
        },
    )
    assert tokens.status_code == 200, tokens.text
    assert tokens.json()["refresh_token"]
    assert mcp_post(service, tokens.json()["access_token"]).status_code != 401
    refreshed = httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens.json()["refresh_token"],
            "scope": scope,
            **credentials,
        },
    )
    assert refreshed.status_code == 200, refreshed.text


def test_other_scopes_are_still_refused(service: Service, user: User) -> None:
    client = register(service).json()
    with httpx.Client(timeout=10) as http:
        r = http.get(
            authorization_url(service, client["client_id"], pkce()[1], scope="admin offline_access")
        )
    # Shown, not redirected: no holder has granted this client anything yet.
    assert r.status_code == 400 and r.json()["error"] == "invalid_scope"
