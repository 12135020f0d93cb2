"""The paysign app on a real socket whose settings name that socket (so ``{mcp_url}`` and
``{auth_url}`` are what a client really reaches), an account with its authenticator secret, and
a browser stand-in that fills the sign-in and consent forms."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pyotp
import pytest

from conftest import FrozenClock, LiveServer, free_port
from paysign.bootstrap import Runtime
from paysign.services import accounts

PASSWORD = "correct horse battery"
REDIRECT = "https://client.example/oauth/callback"


@dataclass
class Service:
    url: str
    runtime: Runtime
    clock: FrozenClock

    @property
    def mcp_url(self) -> str:
        return self.runtime.settings.resolved_mcp_url

    @property
    def auth_url(self) -> str:
        return self.runtime.settings.resolved_auth_url


@dataclass
class User:
    email: str
    account_id: str
    totp_secret: str

    def code(self, clock: FrozenClock, offset_steps: int = 0) -> str:
        return pyotp.TOTP(self.totp_secret).at(clock.now() + 30 * offset_steps)


@pytest.fixture
def service(runtime: Runtime, clock: FrozenClock) -> Iterator[Service]:
    from paysign.app import create_app

    port = free_port()
    runtime = dataclasses.replace(
        runtime, settings=runtime.settings.model_copy(update={"port": port})
    )
    with LiveServer(create_app(runtime), port) as server:
        yield Service(server.url, runtime, clock)


@pytest.fixture
def user(service: Service) -> User:
    rt = service.runtime
    email = f"user-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(rt.db, rt.vault, rt.clock, email=email, password=PASSWORD)
    return User(email, created.account_id, created.totp_secret)


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.decode().rstrip("=")


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found, html
    return unescape(found.group(1))


class Browser:
    """Plays the user: follows /authorize to the sign-in page, fills it, then the consent."""

    def __init__(self, service: Service, user: User) -> None:
        self.service = service
        self.user = user

    def open_login(self, http: httpx.Client, authorization_url: str) -> tuple[str, str]:
        r = http.get(authorization_url)
        assert r.status_code == 302, r.text
        login = r.headers["location"]
        assert login.startswith(f"{self.service.auth_url}/login?txn=")
        page = http.get(login)
        assert page.status_code == 200
        return login, page.text

    def sign_in(
        self,
        http: httpx.Client,
        login: str,
        page: str,
        *,
        email: str | None = None,
        password: str = PASSWORD,
        code: str | None = None,
    ) -> httpx.Response:
        return http.post(
            login.split("?")[0],
            data={
                "txn": hidden(page, "txn"),
                "csrf": hidden(page, "csrf"),
                "email": email or self.user.email,
                "password": password,
                "totp": code or self.user.code(self.service.clock),
            },
        )

    def approve(self, http: httpx.Client, consent_path: str, decision: str = "approve") -> str:
        page = http.get(self.service.url + consent_path)
        assert page.status_code == 200, page.text
        r = http.post(
            self.service.url + consent_path.split("?")[0],
            data={
                "txn": hidden(page.text, "txn"),
                "csrf": hidden(page.text, "csrf"),
                "decision": decision,
            },
        )
        assert r.status_code == 302, r.text
        return str(r.headers["location"])

    def authorize(self, authorization_url: str, **sign_in: Any) -> dict[str, str]:
        """The whole browser leg; returns the query of the redirect to the client."""
        with httpx.Client(timeout=10) as http:
            login, page = self.open_login(http, authorization_url)
            r = self.sign_in(http, login, page, **sign_in)
            assert r.status_code == 303, r.text
            target = self.approve(http, r.headers["location"])
        assert target.startswith(REDIRECT)
        return {k: v[0] for k, v in parse_qs(urlsplit(target).query).items()}


def register(service: Service, **metadata: Any) -> httpx.Response:
    body = {
        "client_name": "Test Assistant",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_post",
        **metadata,
    }
    return httpx.post(f"{service.auth_url}/register", json=body)
