"""The authorization server end to end: the official MCP client's OAuth flow, token refresh,
rotation and revocation, and every refusal."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from paysign.services.oauth_refusals import SIGN_IN_FAILED

from .conftest import REDIRECT, Browser, Service, User, pkce, register


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def mcp_post(service: Service, token: str) -> httpx.Response:
    return httpx.post(
        service.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        },
    )


def is_invalid_token(response: httpx.Response) -> bool:
    return response.status_code == 401 and 'error="invalid_token"' in response.headers.get(
        "www-authenticate", ""
    )


def authorization_url(service: Service, client_id: str, challenge: str, **extra: str) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "xyz",
        "resource": service.mcp_url,
        **extra,
    }
    return f"{service.auth_url}/authorize?" + urlencode({k: v for k, v in query.items() if v})


def exchanged_code(service: Service, user: User, client: dict[str, Any]) -> httpx.Response:
    """The code flow by hand for ``client`` (PKCE, sign-in, consent), then the code exchanged
    with the client's credentials in the form (no secret for a public client)."""
    verifier, challenge = pkce()
    query = Browser(service, user).authorize(
        authorization_url(service, client["client_id"], challenge)
    )
    return exchange(service, client, query["code"], verifier)


def exchange(service: Service, client: dict[str, Any], code: str, verifier: str) -> httpx.Response:
    secret = {"client_secret": client["client_secret"]} if "client_secret" in client else {}
    return httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": client["client_id"],
            **secret,
            "resource": service.mcp_url,
        },
    )


def tokens_for(service: Service, user: User) -> tuple[dict[str, Any], dict[str, Any]]:
    """Register a client and run the code flow by hand; returns (client, token response)."""
    client = register(service).json()
    r = exchanged_code(service, user, client)
    assert r.status_code == 200, r.text
    return client, r.json()


def refresh(service: Service, client: dict[str, Any], token: str) -> httpx.Response:
    return httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": token,
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        },
    )


# ---- discovery ----


def test_metadata_issuer_matches_the_protected_resource_metadata(service: Service) -> None:
    prm = httpx.get(service.url + "/.well-known/oauth-protected-resource").json()
    assert prm["authorization_servers"] == [service.auth_url]
    for path in (
        "/.well-known/oauth-authorization-server/oauth",
        "/oauth/.well-known/oauth-authorization-server",
        "/.well-known/oauth-authorization-server",  # the 2025-03-26 MCP spec's place
    ):
        doc = httpx.get(service.url + path).json()
        assert doc["issuer"] == service.auth_url  # byte for byte
        assert doc["code_challenge_methods_supported"] == ["S256"]
        assert doc["registration_endpoint"] == f"{service.auth_url}/register"
        assert "none" in doc["token_endpoint_auth_methods_supported"]
        assert doc["authorization_response_iss_parameter_supported"] is True
        assert doc["scopes_supported"] == [f"{service.mcp_url}/access", "offline_access"]


# ---- the whole flow with the official MCP client ----


def test_sdk_client_signs_in_lists_tools_and_cannot_pay_yet(service: Service, user: User) -> None:
    browser = Browser(service, user)
    result: dict[str, AuthorizationCodeResult] = {}

    async def redirect_handler(url: str) -> None:
        query = await asyncio.to_thread(browser.authorize, url)
        result["r"] = AuthorizationCodeResult(
            code=query["code"], state=query["state"], iss=query.get("iss")
        )

    async def callback_handler() -> AuthorizationCodeResult:
        return result["r"]

    storage = MemoryStorage()

    async def scenario() -> tuple[set[str], Any]:
        oauth = OAuthClientProvider(
            server_url=service.mcp_url,
            client_metadata=OAuthClientMetadata(
                client_name="SDK test client",
                redirect_uris=[REDIRECT],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="client_secret_post",
            ),
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        async with (
            httpx2.AsyncClient(auth=oauth, timeout=30) as http,
            Client(streamable_http_client(service.mcp_url, http_client=http), mode="legacy") as c,
        ):
            tools = await c.list_tools()
            paid = await c.call_tool("pay_x402", {"url": "https://seller.example/x"})
            return {t.name for t in tools.tools}, paid

    names, paid = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert {"pay_x402", "search_bazaar"} <= names
    # The token reaches the payment path (the seller itself cannot be reached from here);
    # signing for an OAuth account is covered in tests/services/test_policy_enforcement.py.
    assert paid.is_error
    assert "seller.example" in (paid.structured_content or {})["error"]["outboundDetail"]
    assert storage.tokens is not None and storage.tokens.refresh_token
    assert storage.client is not None
    assert storage.tokens.scope == f"{service.mcp_url}/access"
    # The SDK asks for offline_access since the metadata lists it; it is granted, not refused.
    assert "offline_access" in (storage.client.scope or "").split()


# ---- refresh, rotation, revocation ----


def test_refresh_rotates_and_reuse_revokes_the_family(service: Service, user: User) -> None:
    client, first = tokens_for(service, user)
    assert mcp_post(service, first["access_token"]).status_code != 401
    r = refresh(service, client, first["refresh_token"])
    assert r.status_code == 200, r.text
    second = r.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert mcp_post(service, second["access_token"]).status_code != 401
    # The rotated refresh token is dead; presenting it again (after the grace a client that
    # lost the answer has to retry: test_refresh_retry.py) revokes everything it led to.
    service.clock.advance(service.runtime.settings.oauth_refresh_retry_grace_seconds + 1)
    again = refresh(service, client, first["refresh_token"])
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert is_invalid_token(mcp_post(service, second["access_token"]))
    assert refresh(service, client, second["refresh_token"]).status_code == 400


def test_revocation_kills_the_pair(service: Service, user: User) -> None:
    client, tokens = tokens_for(service, user)
    r = httpx.post(
        f"{service.auth_url}/revoke",
        data={
            "token": tokens["access_token"],
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        },
    )
    assert r.status_code == 200
    assert is_invalid_token(mcp_post(service, tokens["access_token"]))
    assert refresh(service, client, tokens["refresh_token"]).status_code == 400


def test_expired_access_token_is_invalid(service: Service, user: User) -> None:
    _, tokens = tokens_for(service, user)
    service.clock.advance(service.runtime.settings.oauth_access_token_ttl_seconds + 1)
    assert is_invalid_token(mcp_post(service, tokens["access_token"]))


def test_token_for_another_resource_is_invalid(service: Service, user: User) -> None:
    from paysign.services.oauth_grants import AuthorizationService, OAuthConfig

    other = OAuthConfig.from_settings(
        service.runtime.settings.model_copy(update={"mcp_url": "https://elsewhere.example/mcp"})
    )
    rt = service.runtime
    elsewhere = AuthorizationService(rt.db, rt.vault, rt.clock, other)
    client = register(service).json()
    with rt.db.write() as conn:
        issued = elsewhere._issue(
            conn,
            "00000000-0000-0000-0000-000000000001",
            client["client_id"],
            user.account_id,
            rt.clock.now(),
        )
    assert is_invalid_token(mcp_post(service, issued.access_token))


# ---- registration ----


def test_registration_returns_its_client_uri(service: Service) -> None:
    r = register(service)
    assert r.status_code == 201, r.text
    doc = r.json()
    uri = doc["registration_client_uri"]
    assert uri == f"{service.auth_url}/register/{doc['client_id']}"
    read = httpx.get(uri, headers={"Authorization": f"Bearer {doc['registration_access_token']}"})
    assert read.status_code == 200 and read.json()["client_name"] == "Test Assistant"
    assert httpx.get(uri, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_http_and_loopback_redirects_are_refused(service: Service) -> None:
    r = register(service, redirect_uris=["http://client.example/cb"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri"
    for uri in ("http://localhost:3000/cb", "http://127.0.0.1:8080/cb", "https://localhost/cb"):
        r = register(service, redirect_uris=[uri])
        assert r.status_code == 400, uri
        assert r.json()["error"] == "invalid_redirect_uri"
        assert "API key" in r.json()["error_description"]


# ---- the authorization request ----


def test_pkce_is_required_and_s256_only(service: Service) -> None:
    client = register(service).json()
    _, challenge = pkce()
    missing = httpx.get(authorization_url(service, client["client_id"], ""))
    plain = httpx.get(
        authorization_url(service, client["client_id"], challenge, code_challenge_method="plain")
    )
    for r in (missing, plain):
        assert r.status_code == 400 and r.json()["error"] == "invalid_request"


def test_an_error_goes_back_to_a_client_only_once_a_holder_granted_it(
    service: Service, user: User
) -> None:
    """Registration is open: anyone can register a client whose redirect URI is their page and
    hand out a link of ours that fails at once. Redirected, it takes its follower from our
    address to theirs."""
    client = register(service).json()
    _, challenge = pkce()
    failing = authorization_url(service, client["client_id"], "")  # no PKCE challenge
    as_form = dict(parse_qsl(urlsplit(failing).query))
    for shown in (httpx.get(failing), httpx.post(f"{service.auth_url}/authorize", data=as_form)):
        assert shown.status_code == 400 and "location" not in shown.headers
        assert shown.headers["cache-control"] == "no-store"
        assert shown.json()["error"] == "invalid_request" and shown.json()["state"] == "xyz"

    Browser(service, user).authorize(authorization_url(service, client["client_id"], challenge))
    redirected = httpx.get(failing)
    assert redirected.status_code == 302
    location = redirected.headers["location"]
    assert location.startswith(REDIRECT) and "error=invalid_request" in location


def test_wrong_resource_is_refused(service: Service, user: User) -> None:
    client = register(service).json()
    verifier, challenge = pkce()
    r = httpx.get(
        authorization_url(
            service, client["client_id"], challenge, resource="https://elsewhere.example/mcp"
        )
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_target"
    query = Browser(service, user).authorize(
        authorization_url(service, client["client_id"], challenge)
    )
    r = httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
            "resource": "https://elsewhere.example/mcp",
        },
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_target"


def test_code_is_single_use_and_reuse_revokes_its_tokens(service: Service, user: User) -> None:
    client = register(service).json()
    verifier, challenge = pkce()
    query = Browser(service, user).authorize(
        authorization_url(service, client["client_id"], challenge)
    )
    assert query["iss"] == service.auth_url and query["state"] == "xyz"
    data = {
        "grant_type": "authorization_code",
        "code": query["code"],
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        "client_id": client["client_id"],
        "client_secret": client["client_secret"],
    }
    first = httpx.post(f"{service.auth_url}/token", data=data)
    assert first.status_code == 200
    again = httpx.post(f"{service.auth_url}/token", data=data)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert is_invalid_token(mcp_post(service, first.json()["access_token"]))


def test_code_expires_within_a_minute(service: Service, user: User) -> None:
    client = register(service).json()
    verifier, challenge = pkce()
    query = Browser(service, user).authorize(
        authorization_url(service, client["client_id"], challenge)
    )
    service.clock.advance(61)
    r = httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        },
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_deny_redirects_with_access_denied(service: Service, user: User) -> None:
    client = register(service).json()
    _, challenge = pkce()
    browser = Browser(service, user)
    with httpx.Client() as http:
        login, page = browser.open_login(
            http, authorization_url(service, client["client_id"], challenge)
        )
        consent_path = browser.sign_in(http, login, page).headers["location"]
        consent = http.get(service.url + consent_path)
        assert "client.example" in consent.text and "Test Assistant" in consent.text
        target = browser.approve(http, consent_path, "deny")
    assert target.startswith(REDIRECT) and "error=access_denied" in target


# ---- sign-in ----


def _sign_in_page(service: Service, user: User) -> tuple[Browser, httpx.Client, str, str]:
    client = register(service).json()
    _, challenge = pkce()
    browser = Browser(service, user)
    http = httpx.Client()
    login, page = browser.open_login(
        http, authorization_url(service, client["client_id"], challenge)
    )
    return browser, http, login, page


def test_totp_code_is_usable_once(service: Service, user: User) -> None:
    code = user.code(service.clock)
    Browser(service, user).authorize(
        authorization_url(service, register(service).json()["client_id"], pkce()[1]), code=code
    )
    browser, http, login, page = _sign_in_page(service, user)
    with contextlib.closing(http):
        r = browser.sign_in(http, login, page, code=code)
        # Told apart from a wrong code: the password was right, the code is simply spent.
        assert r.status_code == 401 and "was already used to sign in" in r.text
        assert "wait for the next code" in r.text
        wrong = browser.sign_in(http, login, page, password="not the password", code=code)
        assert wrong.status_code == 401 and "was already used" not in wrong.text
        # The next step's code is accepted (±1 step of clock drift).
        r = browser.sign_in(http, login, page, code=user.code(service.clock, 1))
        assert r.status_code == 303


def test_wrong_password_and_unknown_email_look_the_same(service: Service, user: User) -> None:
    browser, http, login, page = _sign_in_page(service, user)
    with contextlib.closing(http):
        wrong = browser.sign_in(http, login, page, password="not the password at all")
        unknown = browser.sign_in(http, login, page, email="nobody@example.com")
        bad_code = browser.sign_in(http, login, page, code="000000")
    for r in (wrong, unknown, bad_code):
        assert r.status_code == 401
        assert SIGN_IN_FAILED.split(".")[0] in r.text


def test_failures_are_rate_limited(service: Service, user: User) -> None:
    browser, http, login, page = _sign_in_page(service, user)
    with contextlib.closing(http):
        for _ in range(service.runtime.settings.oauth_max_failures_per_account):
            assert (
                browser.sign_in(http, login, page, password="wrong password!!").status_code == 401
            )
        limited = browser.sign_in(http, login, page)  # now even the right credentials wait
        assert limited.status_code == 429 and "Too many failed sign-ins" in limited.text
        service.clock.advance(service.runtime.settings.oauth_failure_window_seconds + 1)
        assert browser.sign_in(http, login, page, code=user.code(service.clock)).status_code != 429


def test_forms_need_their_csrf_token(service: Service, user: User) -> None:
    browser, http, login, page = _sign_in_page(service, user)
    with contextlib.closing(http):
        forged = page.replace('name="csrf" value="', 'name="csrf" value="forged')
        r = browser.sign_in(http, login, forged)
        assert r.status_code == 400
