"""No redirect names a host the client made up: a ``Host`` header is the client's word, so a
``Location`` built from it would send a victim's browser wherever an attacker says (cache
poisoning, links in mail). Real HTTP requests to the app on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from conftest import LiveServer
from paysign.bootstrap import Runtime

FOREIGN = "evil.example"


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    from paysign.app import create_app

    with LiveServer(create_app(runtime)) as live:
        yield live


# Each path is one that the app redirects (a missing or extra trailing slash) or answers
# itself; whatever it answers, it must not send the client to FOREIGN.
PATHS = [
    ("GET", "/portal"),
    ("GET", "/portal?next=1"),
    ("HEAD", "/portal"),
    ("GET", "/portal/sign-in/"),
    ("POST", "/portal/sign-in/"),
    ("GET", "/portal/activity/"),
    ("GET", "/catalog/"),
    ("GET", "/buyers/catalog/"),
    ("GET", "/catalog/full.json/"),
    ("POST", "/wallets/signatures/"),
    ("POST", "/wallets/testnet/funds/"),
    ("GET", "/problems/not-found/"),
    ("GET", "/healthz/"),
    ("GET", "/openapi.json/"),
    ("POST", "/mcp/"),
    ("GET", "/.well-known/oauth-protected-resource/mcp/"),
    ("GET", "/.well-known/oauth-authorization-server/"),
    ("GET", "/oauth/authorize/"),
    ("GET", "/oauth/sign-in/"),
    ("POST", "/oauth/token/"),
    ("POST", "/oauth/register/"),
    ("GET", "//evil.example/"),
    ("GET", "/\\evil.example/"),
]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("host", [FOREIGN, f"{FOREIGN}:8402", f"user@{FOREIGN}"])
def test_no_redirect_names_a_foreign_host(server: LiveServer, host: str) -> None:
    redirects = 0
    with httpx.Client(base_url=server.url, timeout=10, follow_redirects=False) as client:
        for method, path in PATHS:
            response = client.request(method, path, headers={"Host": host})
            location = response.headers.get("location", "")
            assert FOREIGN not in location, (method, path, location)
            if location:
                redirects += 1
                # Relative to the origin the client used, never protocol-relative.
                assert location.startswith("/") and not location.startswith(("//", "/\\"))
    assert redirects >= 5  # the slash redirects still happen


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_portal_without_its_slash_lands_on_the_portal(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        moved = client.get("/portal?x=1", headers={"Host": FOREIGN}, follow_redirects=False)
        assert moved.status_code in (307, 308)
        assert moved.headers["location"] == "/portal/?x=1"
        landed = client.get("/portal", follow_redirects=True)
    assert landed.status_code == 200
    assert landed.url.path == "/portal/sign-in"
