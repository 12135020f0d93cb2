"""How many MCP sessions one credential may hold, over real HTTP: a key opening sessions in a
loop keeps only its most recent ones (it cannot fill the process's room for everyone else), and
a revoked key's sessions are closed at its next request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import LiveServer, free_port, make_database_url, new_account
from paysign.app import create_app
from paysign.bootstrap import Runtime
from paysign.config import Settings
from paysign.connector import Connector
from paysign.services import account_admin, keys

PER_PRINCIPAL = 3
VERSION = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    yield from make_database_url("sqlite", tmp_path)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        port=free_port(),
        data_dir=tmp_path / "var",
        database_url=database_url,
        connector_max_sessions_per_principal=PER_PRINCIPAL,
    )


@pytest.fixture
def connector(runtime: Runtime) -> Iterator[Connector]:
    app = create_app(runtime)
    with LiveServer(app, runtime.settings.port):
        connector: Connector = app.state.connector
        yield connector


@pytest.fixture
def mcp(connector: Connector) -> str:
    return connector.mcp_url


def open_sessions(connector: Connector) -> int:
    return len(connector.manager._server_instances)


def headers(api_key: str, session: str | None = None) -> dict[str, str]:
    found = {
        "Authorization": f"Bearer {api_key}",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": VERSION,
    }
    if session is not None:
        found["Mcp-Session-Id"] = session
    return found


def initialize(mcp: str, api_key: str) -> str:
    answer = httpx.post(mcp, headers=headers(api_key), json=INITIALIZE, timeout=30)
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = httpx.post(mcp, headers=headers(api_key, session), json=initialized, timeout=30)
    assert done.status_code == 202, done.text
    return session


def ping(mcp: str, api_key: str, session: str) -> int:
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    return httpx.post(mcp, headers=headers(api_key, session), json=request, timeout=30).status_code


def test_a_key_opening_sessions_in_a_loop_keeps_only_its_most_recent(
    connector: Connector, mcp: str, account: dict[str, str], runtime: Runtime
) -> None:
    opened = [initialize(mcp, account["api_key"]) for _ in range(PER_PRINCIPAL + 5)]

    assert open_sessions(connector) == PER_PRINCIPAL
    assert [ping(mcp, account["api_key"], s) for s in opened[:5]] == [404] * 5
    assert [ping(mcp, account["api_key"], s) for s in opened[5:]] == [200] * PER_PRINCIPAL
    other = new_account(runtime)["api_key"]
    assert ping(mcp, other, initialize(mcp, other)) == 200


def test_the_least_recently_used_session_is_the_one_closed(
    connector: Connector, mcp: str, account: dict[str, str]
) -> None:
    key = account["api_key"]
    first, second, *_ = [initialize(mcp, key) for _ in range(PER_PRINCIPAL)]
    assert ping(mcp, key, first) == 200  # the assistant still uses its first session

    initialize(mcp, key)

    assert ping(mcp, key, second) == 404
    assert ping(mcp, key, first) == 200


def test_sessions_opened_all_at_once_stay_within_the_limit(
    connector: Connector, mcp: str, account: dict[str, str]
) -> None:
    async def flood() -> list[int]:
        async with httpx.AsyncClient(timeout=30) as client:
            answers = await asyncio.gather(
                *(
                    client.post(mcp, headers=headers(account["api_key"]), json=INITIALIZE)
                    for _ in range(4 * PER_PRINCIPAL)
                )
            )
        for answer in answers:
            if answer.status_code == 429:
                assert answer.headers["retry-after"] == "1"
        return [answer.status_code for answer in answers]

    statuses = asyncio.run(flood())

    assert set(statuses) <= {200, 429}
    assert open_sessions(connector) <= PER_PRINCIPAL


@pytest.mark.parametrize("refusal", [keys.revoke_key, account_admin.disable_account])
def test_a_refused_keys_sessions_are_closed_at_its_next_request(
    connector: Connector,
    mcp: str,
    account: dict[str, str],
    runtime: Runtime,
    refusal: Callable[..., object],
) -> None:
    sessions = [initialize(mcp, account["api_key"]) for _ in range(PER_PRINCIPAL)]
    refusal(runtime.db, runtime.clock, email=account["email"])

    assert ping(mcp, account["api_key"], sessions[0]) == 401

    assert open_sessions(connector) == 0


def test_another_credential_cannot_close_a_session(
    connector: Connector, mcp: str, account: dict[str, str], runtime: Runtime
) -> None:
    session = initialize(mcp, account["api_key"])
    stranger = new_account(runtime)
    keys.revoke_key(runtime.db, runtime.clock, email=stranger["email"])

    for refused in (stranger["api_key"], "psk_" + "0" * 40, "not-a-key"):
        assert ping(mcp, refused, session) == 401

    assert ping(mcp, account["api_key"], session) == 200
