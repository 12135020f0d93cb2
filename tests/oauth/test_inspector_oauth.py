"""The MCP Inspector CLI (tests/inspector_support.py) with OAuth, against paysign on a socket.

The Inspector's own sign-in cannot complete against paysign, by design on both sides: its
callback listener must be a plain-http loopback address (``--callback-url``: "must be
loopback"; it refuses any other host), and paysign registers no loopback redirect (a code sent
to a port on the user's machine can be caught by any program there). The test below runs that
sign-in and sees the registration refused with the advice to use an API key. What the CLI can
do with OAuth: send an access token issued by paysign's real flow (``--header``), and reuse a
grant its web UI stored (``--use-stored-auth``), refreshing it at paysign's token endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from conftest import free_port
from inspector_support import inspector, oauth_state_path
from paysign.store.schema import oauth_clients, wallets

from .conftest import Service, User, register
from .test_oauth import exchanged_code, tokens_for

TOOLS = {"pay_x402", "search_bazaar", "wallet_status"}

# The Inspector is a Node program; the SQLite database is enough to exercise it.
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def test_the_inspectors_own_sign_in_is_refused_with_its_loopback_callback(
    service: Service, tmp_path: Path
) -> None:
    callback = f"http://127.0.0.1:{free_port()}/oauth/callback"
    result = inspector(
        tmp_path / "home",
        service.mcp_url,
        "--callback-url",
        callback,
        "--format",
        "json",
        stored_auth_only=False,
        # Lets the CLI start its login without a terminal; no browser can open here.
        env={"MCP_AUTO_OPEN_ENABLED": "true", "BROWSER": "true", "DISPLAY": ""},
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    # It discovered paysign from the 401, then asked to register its loopback callback.
    assert "Dynamic Client Registration rejected (HTTP 400)" in output, output
    assert "invalid_redirect_uri" in output and "must use an API key instead" in output, output
    with service.runtime.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(oauth_clients)).scalar() == 0


def wallet_of(service: Service, user: User) -> str:
    with service.runtime.db.read() as conn:
        address = conn.execute(
            sa.select(wallets.c.address).where(wallets.c.account_id == user.account_id)
        ).scalar_one()
    return str(address)


def revoke(service: Service, client: dict[str, str], token: str) -> None:
    r = httpx.post(
        f"{service.auth_url}/revoke",
        data={
            "token": token,
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        },
    )
    assert r.status_code == 200, r.text


def test_the_inspector_connects_with_an_access_token_from_the_oauth_flow(
    service: Service, user: User, tmp_path: Path
) -> None:
    client, tokens = tokens_for(service, user)  # sign-in, authenticator code, consent
    bearer = f"Authorization: Bearer {tokens['access_token']}"

    listed = inspector(tmp_path / "home", service.mcp_url, "--header", bearer, "--format", "json")
    output = listed.stdout + listed.stderr
    assert listed.returncode == 0, output
    assert {tool["name"] for tool in json.loads(listed.stdout)["result"]["tools"]} >= TOOLS
    assert tokens["access_token"] not in output

    called = inspector(
        tmp_path / "home",
        service.mcp_url,
        "--header",
        bearer,
        "--tool-name",
        "wallet_status",
        "--format",
        "json",
        method="tools/call",
    )
    assert called.returncode == 0, called.stdout + called.stderr
    status = json.loads(called.stdout)["result"]["structuredContent"]
    assert status["walletAddress"] == wallet_of(service, user)  # the signed-in account's
    assert [cap["cap"] for cap in status["caps"]] == ["perPayment", "daily", "monthly"]

    revoke(service, client, tokens["access_token"])
    refused = inspector(tmp_path / "home", service.mcp_url, "--header", bearer, "--format", "json")
    output = refused.stdout + refused.stderr
    assert refused.returncode == 3, output  # the Inspector's auth_required
    assert "auth_required" in output and "pay_x402" not in refused.stdout, output


def public_client_tokens(service: Service, user: User) -> tuple[dict[str, Any], dict[str, Any]]:
    """A grant for a public client (``token_endpoint_auth_method: none``, as the Inspector
    registers itself), through the real flow: registration, sign-in with the authenticator
    code, consent, code exchange with PKCE."""
    client = register(service, token_endpoint_auth_method="none").json()
    assert "client_secret" not in client
    r = exchanged_code(service, user, client)
    assert r.status_code == 200, r.text
    return client, r.json()


def test_the_inspector_refreshes_a_stored_oauth_grant_and_connects(
    service: Service, user: User, tmp_path: Path
) -> None:
    client, tokens = public_client_tokens(service, user)
    home = tmp_path / "home"
    home.mkdir()
    state = oauth_state_path(home)
    # The Inspector's state file as its web UI leaves it after a sign-in; the access token is
    # one paysign never issued, so only a refresh through paysign's token endpoint connects.
    state.write_text(
        json.dumps(
            {
                "servers": {
                    service.mcp_url: {
                        "tokens": {
                            "access_token": "not-a-paysign-token",
                            "token_type": "Bearer",
                            "refresh_token": tokens["refresh_token"],
                        },
                        "clientInformation": {"client_id": client["client_id"]},
                    }
                }
            }
        )
    )
    result = inspector(
        home,
        service.mcp_url,
        "--use-stored-auth",
        "--format",
        "json",
        server_url_option=True,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert {tool["name"] for tool in json.loads(result.stdout)["result"]["tools"]} >= TOOLS
    assert tokens["refresh_token"] not in output

    # The Inspector rotated the stored refresh token at paysign's token endpoint: presented
    # again after the retry grace, it is a replay.
    service.clock.advance(service.runtime.settings.oauth_refresh_retry_grace_seconds + 1)
    replay = httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client["client_id"],
        },
    )
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant", replay.text
