"""Browser-based MCP clients (the MCP Inspector's UI) connect from their own origin: the
discovery metadata, registration, the token endpoint and the connector answer CORS preflight
requests, for any origin and without credentials. The portal and the signing API do not."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Service, User, register
from .test_oauth import refresh, tokens_for

ORIGIN = "http://localhost:6274"  # where the Inspector's UI runs


def preflight(url: str, method: str, headers: str = "content-type") -> httpx.Response:
    return httpx.options(
        url,
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": headers,
        },
    )


def assert_open(response: httpx.Response) -> None:
    assert response.headers.get("access-control-allow-origin") == "*", response.headers
    assert "access-control-allow-credentials" not in response.headers


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-authorization-server/oauth",
        "/oauth/.well-known/oauth-authorization-server",
    ],
)
def test_metadata_is_readable_from_another_origin(service: Service, path: str) -> None:
    answer = preflight(service.url + path, "GET", "mcp-protocol-version")
    assert answer.status_code == 200, answer.text
    assert_open(answer)
    assert "GET" in answer.headers["access-control-allow-methods"]
    document = httpx.get(service.url + path, headers={"Origin": ORIGIN})
    assert document.status_code == 200
    assert_open(document)


def test_registration_and_token_requests_work_from_another_origin(
    service: Service, user: User
) -> None:
    for path in ("/register", "/token"):
        answer = preflight(service.auth_url + path, "POST")
        assert answer.status_code == 200, answer.text
        assert_open(answer)
        assert "POST" in answer.headers["access-control-allow-methods"]
    registered = register(service)
    assert registered.status_code == 201
    client, tokens = tokens_for(service, user)
    refreshed = httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        },
        headers={"Origin": ORIGIN},
    )
    assert refreshed.status_code == 200, refreshed.text
    assert_open(refreshed)
    refused = refresh(service, client, "not-a-token")
    assert refused.status_code == 400


def test_the_connector_answers_preflight_and_exposes_its_challenge(service: Service) -> None:
    answer = preflight(service.mcp_url, "POST", "authorization, content-type, mcp-protocol-version")
    assert answer.status_code == 200, answer.text
    assert_open(answer)
    allowed = answer.headers["access-control-allow-headers"].lower()
    assert {"authorization", "mcp-protocol-version", "mcp-session-id"} <= {
        h.strip() for h in allowed.split(",")
    }
    unauthenticated = httpx.post(
        service.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Origin": ORIGIN, "Accept": "application/json, text/event-stream"},
    )
    assert unauthenticated.status_code == 401
    assert_open(unauthenticated)
    exposed = unauthenticated.headers["access-control-expose-headers"].lower()
    assert "www-authenticate" in exposed


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/portal/sign-in", "POST"),
        ("/wallets/signatures", "POST"),
        ("/oauth/login", "POST"),
        ("/oauth/consent", "POST"),
    ],
)
def test_the_portal_the_signing_api_and_the_sign_in_pages_stay_same_origin(
    service: Service, path: str, method: str
) -> None:
    answer = preflight(service.url + path, method, "authorization, content-type")
    assert "access-control-allow-origin" not in answer.headers
    plain = httpx.get(service.url + path, headers={"Origin": ORIGIN})
    assert "access-control-allow-origin" not in plain.headers


def test_a_plain_options_request_is_answered_without_reaching_the_endpoint(
    service: Service,
) -> None:
    from paysign.store.schema import oauth_clients

    for url in (f"{service.auth_url}/register", f"{service.auth_url}/token", service.mcp_url):
        answer = httpx.options(url)
        assert answer.status_code == 204, (url, answer.text)
        assert "OPTIONS" in answer.headers["allow"]
    with service.runtime.db.read() as conn:
        assert conn.execute(oauth_clients.select()).first() is None
