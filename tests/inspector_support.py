"""The MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``, pinned in package.json) run
as a user runs it, offline: HOME and every file it writes point into the test's temporary
directory, and it is only ever given a loopback server's URL."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"
TIMEOUT = 90


def inspector_env(home: Path) -> dict[str, str]:
    """The caller's environment minus proxies, with every Inspector path in ``home``.

    The Inspector documents no telemetry or update check (none is in its code either); the
    variables below only keep its state files (catalog, client config, OAuth state, logs)
    out of the real home directory."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    }
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        USERPROFILE=str(home),
        MCP_STORAGE_DIR=str(home / "storage"),
        MCP_CATALOG_PATH=str(home / "mcp.json"),
        MCP_CLIENT_CONFIG_PATH=str(home / "client.json"),
        MCP_INSPECTOR_OAUTH_STATE_PATH=str(oauth_state_path(home)),
        MCP_INSPECTOR_LOG_DIR=str(home / "logs"),
        # Never the OS keychain: secrets stay in this run (and in the state file a test wrote).
        MCP_INSPECTOR_SECRET_STORE="memory",
        NO_PROXY="127.0.0.1,localhost",
        NO_COLOR="1",
        DO_NOT_TRACK="1",
        NO_UPDATE_NOTIFIER="1",
        npm_config_update_notifier="false",
    )
    return env


def oauth_state_path(home: Path) -> Path:
    """Where the Inspector keeps OAuth tokens and client registrations for ``home``."""
    return home / "oauth-state.json"


def inspector(
    home: Path,
    url: str,
    *args: str,
    method: str = "tools/list",
    stored_auth_only: bool = True,
    env: dict[str, str] | None = None,
    server_url_option: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``mcp-inspector --cli URL --method METHOD ARGS…`` over streamable HTTP.
    ``stored_auth_only`` (the default) keeps it from ever starting an interactive OAuth
    login, which would wait for a person. ``server_url_option``: name the server with
    ``--server-url`` (what ``--use-stored-auth`` needs) instead of as the target."""
    if not os.access(INSPECTOR, os.X_OK):
        pytest.fail(
            f"the MCP Inspector CLI is not installed ({INSPECTOR} is missing): run `make install`",
            pytrace=False,
        )
    return subprocess.run(
        [
            str(INSPECTOR),
            "--cli",
            *(["--server-url", url] if server_url_option else [url]),
            "--transport",
            "http",
            "--protocol-era",
            "legacy",
            "--method",
            method,
            *(["--stored-auth-only"] if stored_auth_only else []),
            "--connect-timeout",
            "30000",
            *args,
        ],
        env={**inspector_env(home), **(env or {})},
        cwd=home,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
