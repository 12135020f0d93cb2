"""The connector as the MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``, pinned in
package.json) sees it: paysign over real HTTP on 127.0.0.1, the tools listed with an API key,
and refused without one. The Inspector runs offline: HOME and every file it writes point into
the test's temporary directory, and it is only ever given the loopback server's URL."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import LiveServer
from paysign.bootstrap import Runtime
from paysign.services.catalog import demo_catalog, import_catalog

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"
TIMEOUT = 90

# The Inspector is a Node program; the SQLite database is enough to exercise it.
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


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
        MCP_INSPECTOR_OAUTH_STATE_PATH=str(home / "oauth-state.json"),
        MCP_INSPECTOR_LOG_DIR=str(home / "logs"),
        NO_PROXY="127.0.0.1,localhost",
        NO_COLOR="1",
        DO_NOT_TRACK="1",
        NO_UPDATE_NOTIFIER="1",
        npm_config_update_notifier="false",
    )
    return env


def inspector(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    if not os.access(INSPECTOR, os.X_OK):
        pytest.fail(
            f"the MCP Inspector CLI is not installed ({INSPECTOR} is missing): run `make install`",
            pytrace=False,
        )
    return subprocess.run(
        [
            str(INSPECTOR),
            "--cli",
            url,
            "--transport",
            "http",
            "--protocol-era",
            "legacy",
            "--method",
            "tools/list",
            "--stored-auth-only",  # never start an interactive OAuth login
            "--connect-timeout",
            "30000",
            *args,
        ],
        env=inspector_env(home),
        cwd=home,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_inspector_lists_the_tools_with_an_api_key(
    runtime: Runtime, live_server: LiveServer, account: dict[str, str], tmp_path: Path
) -> None:
    catalog = demo_catalog("http://127.0.0.1:8403")
    import_catalog(runtime.db, runtime.clock, catalog)
    listed = {x["name"] for x in catalog["catalog"] if x["tier"] in {"PREMIUM", "STANDARD"}}
    assert listed  # the demo catalog has Premium and Standard listings
    url = f"{live_server.url}/mcp"

    result = inspector(
        tmp_path / "home",
        url,
        "--header",
        f"Authorization: Bearer {account['api_key']}",
        "--format",
        "json",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for name in (*listed, "pay_x402", "search_bazaar", "wallet_status"):
        assert name in result.stdout, (name, output)
    names = {tool["name"] for tool in json.loads(result.stdout)["result"]["tools"]}
    assert names == listed | {"pay_x402", "search_bazaar", "wallet_status"}
    assert account["api_key"] not in output  # the key is never echoed

    refused = inspector(tmp_path / "home-nokey", url, "--format", "json")
    output = refused.stdout + refused.stderr
    # Exit 3 with {"error": {"code": "auth_required", ... "Unauthorized"}}: the server's 401.
    assert refused.returncode != 0, output
    assert any(word in output for word in ("401", "Unauthorized", "auth_required")), output
    for name in (*listed, "pay_x402", "search_bazaar", "wallet_status"):
        assert name not in refused.stdout, (name, output)
