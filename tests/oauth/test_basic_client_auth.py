"""A confidential client that authenticates with HTTP Basic only, as RFC 6749 §2.3.1 and the
JavaScript MCP SDK (the Inspector) do: its credentials in the header, no ``client_id`` in the form.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from .conftest import REDIRECT, Browser, Service, User, pkce, register
from .test_oauth import authorization_url


def basic(client_id: str, secret: str) -> httpx.BasicAuth:
    # RFC 6749 §2.3.1: both parts form-urlencoded before the Basic encoding.
    return httpx.BasicAuth(quote(client_id, safe=""), quote(secret, safe=""))


def basic_client(service: Service) -> dict[str, Any]:
    registered = register(service, token_endpoint_auth_method="client_secret_basic")
    assert registered.status_code == 201, registered.text
    client: dict[str, Any] = registered.json()
    assert client["token_endpoint_auth_method"] == "client_secret_basic"
    return client


def code_for(service: Service, user: User, client: dict[str, Any]) -> tuple[str, str]:
    verifier, challenge = pkce()
    query = Browser(service, user).authorize(
        authorization_url(service, client["client_id"], challenge)
    )
    return query["code"], verifier


def exchanged_with_basic(service: Service, user: User, client: dict[str, Any]) -> httpx.Response:
    """The code flow for ``client``, its code exchanged with HTTP Basic credentials alone."""
    code, verifier = code_for(service, user, client)
    return httpx.post(
        f"{service.auth_url}/token",
        auth=basic(client["client_id"], client["client_secret"]),
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "resource": service.mcp_url,
        },
    )


def test_a_basic_client_exchanges_its_code_refreshes_and_revokes(
    service: Service, user: User
) -> None:
    client = basic_client(service)
    credentials = basic(client["client_id"], client["client_secret"])
    token = f"{service.auth_url}/token"
    exchanged = exchanged_with_basic(service, user, client)
    assert exchanged.status_code == 200, exchanged.text
    tokens = exchanged.json()
    refreshed = httpx.post(
        token,
        auth=credentials,
        data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
    )
    assert refreshed.status_code == 200, refreshed.text
    new_refresh = refreshed.json()["refresh_token"]
    revoked = httpx.post(
        f"{service.auth_url}/revoke", auth=credentials, data={"token": new_refresh}
    )
    assert revoked.status_code == 200, revoked.text
    after = httpx.post(
        token,
        auth=credentials,
        data={"grant_type": "refresh_token", "refresh_token": new_refresh},
    )
    assert after.status_code == 400 and after.json()["error"] == "invalid_grant"


def test_basic_credentials_with_a_wrong_secret_get_nothing(service: Service, user: User) -> None:
    client = basic_client(service)
    code, verifier = code_for(service, user, client)
    wrong = httpx.post(
        f"{service.auth_url}/token",
        auth=basic(client["client_id"], client["client_secret"] + "x"),
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "resource": service.mcp_url,
        },
    )
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    # Another client's id in the form, with the first client's credentials in the header.
    other = basic_client(service)
    mismatched = httpx.post(
        f"{service.auth_url}/token",
        auth=basic(client["client_id"], client["client_secret"]),
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": other["client_id"],
        },
    )
    assert mismatched.status_code == 401 and mismatched.json()["error"] == "invalid_client"
