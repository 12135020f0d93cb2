"""The connector as the MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``, pinned in
package.json) sees it: paysign over real HTTP on 127.0.0.1, the tools listed with an API key,
and refused without one. With OAuth: tests/oauth/test_inspector_oauth.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import LiveServer
from inspector_support import inspector
from paysign.bootstrap import Runtime
from paysign.services.catalog import demo_catalog, import_catalog

# The Inspector is a Node program; the SQLite database is enough to exercise it.
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


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
