"""docs/connector.md as a user copies it: the 401 it shows is the one served, the JSON
snippets are valid JSON naming the connector, and the Python SDK snippet runs as written
against a real server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from paysign.services import keys

from .conftest import Service, User

DOC = Path(__file__).resolve().parents[2] / "docs" / "connector.md"
DEFAULT_MCP = "http://127.0.0.1:8402/mcp"


def blocks(language: str, section: str | None = None) -> list[str]:
    text = DOC.read_text()
    if section is not None:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_the_documented_challenge_is_the_served_one(service: Service) -> None:
    (shown,) = blocks("http")
    served = httpx.post(
        service.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    host = service.mcp_url.removesuffix("/mcp").removeprefix("http://")
    expected = shown.replace("127.0.0.1:8402", host)
    assert f"HTTP/1.1 {served.status_code} Unauthorized" in expected
    assert f"www-authenticate: {served.headers['www-authenticate']}\n" in expected
    assert f"content-type: {served.headers['content-type']}\n" in expected
    assert expected.rstrip().endswith(served.text)


def test_every_json_snippet_is_valid_and_names_the_connector() -> None:
    snippets = blocks("json", "Connecting clients")
    assert len(snippets) == 3  # Claude Desktop, Cursor, VS Code
    for snippet in snippets:
        text = json.dumps(json.loads(snippet))
        assert DEFAULT_MCP in text


def test_the_python_sdk_snippet_runs_with_an_api_key(service: Service, user: User) -> None:
    snippet = next(s for s in blocks("python", "Connecting clients") if "PAYSIGN_API_KEY" in s)
    rt = service.runtime
    issued = keys.issue_key(rt.db, rt.clock, email=user.email, expires_in_days=30)
    env = {**os.environ, "PAYSIGN_API_KEY": issued.api_key, "PAYSIGN_MCP_URL": service.mcp_url}
    done = subprocess.run(
        [sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "pay_x402" in done.stdout
