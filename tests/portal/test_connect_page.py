"""The Connect page: the addresses an assistant needs, the active key's prefix and expiry (never
the key), snippets that work as shown once the key is put in, and OAuth as the other way."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, expect

from conftest import FrozenClock, LiveServer, free_port
from paysign.bootstrap import Runtime
from paysign.services import accounts, keys
from portal.conftest import signed_in

PLACEHOLDER = "<YOUR_API_KEY>"
SNIPPETS = [
    "snippet-python",
    "snippet-mcp-sdk",
    "snippet-claude-code",
    "snippet-claude-desktop",
    "snippet-cursor",
    "snippet-vscode",
]


@pytest.fixture
def own_address(runtime: Runtime) -> Iterator[LiveServer]:
    """The app at the address its settings name, so the page's addresses are this server's."""
    from paysign.app import create_app

    port = free_port()
    at_port = dataclasses.replace(
        runtime, settings=runtime.settings.model_copy(update={"port": port})
    )
    with LiveServer(create_app(at_port), port) as server:
        yield server


def _snippet(page: httpx.Response, snippet_id: str) -> str:
    found = re.search(rf'<code id="{snippet_id}">(.*?)</code>', page.text, re.S)
    assert found, page.text
    return html.unescape(found.group(1))


def test_the_page_shows_the_addresses_and_the_key_prefix_never_the_key(
    own_address: LiveServer, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    issued = keys.issue_key(runtime.db, clock, email=holder.email, expires_in_days=30)
    with httpx.Client(base_url=own_address.url, timeout=10) as browser:
        home = signed_in(browser, holder, clock)
        assert '<a href="/portal/connect">Connect</a>' in home.text  # in the navigation
        assert 'href="/portal/connect"' in browser.get("/portal/settings").text
        page = browser.get("/portal/connect")
    assert page.status_code == 200
    assert f'<code id="api-url">{own_address.url}</code>' in page.text
    assert f'<code id="mcp-url">{own_address.url}/mcp</code>' in page.text
    key_cell = page.text.split('id="connect-key">')[1].split("</td>")[0]
    prefix = issued.api_key[:8]  # what the key page and the overview show
    assert f"<code>{prefix}…</code>" in key_cell
    assert '<time datetime="2026-10-21T14:13:20Z"' in key_cell  # 30 days after the clock's now
    # The key itself appears nowhere, not even its secret part.
    assert issued.api_key not in page.text
    assert issued.api_key[8:20] not in page.text
    for snippet_id in SNIPPETS:
        text = _snippet(page, snippet_id)
        assert PLACEHOLDER in text and f"{own_address.url}" in text, snippet_id
    for snippet_id in ("snippet-claude-desktop", "snippet-cursor", "snippet-vscode"):
        json.loads(_snippet(page, snippet_id))  # each is a valid config file as shown
    compile(_snippet(page, "snippet-python"), "snippet-python", "exec")
    assert "OAuth" in page.text and f"{own_address.url}/oauth" in page.text


def test_without_an_active_key_the_page_says_to_create_one(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    page = browser.get("/portal/connect")
    key_cell = page.text.split('id="connect-key">')[1].split("</td>")[0]
    assert 'href="/portal/keys">create one</a>' in key_cell


def test_the_page_needs_a_signed_in_session(browser: httpx.Client) -> None:
    response = browser.get("/portal/connect")
    assert response.status_code == 303 and response.headers["location"] == "/portal/sign-in"
    bearer = browser.get("/portal/connect", headers={"Authorization": "Bearer psk_x"})
    assert bearer.status_code == 403


def test_the_mcp_sdk_snippet_lists_the_tools_once_the_key_is_put_in(
    own_address: LiveServer, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    issued = keys.issue_key(runtime.db, clock, email=holder.email, expires_in_days=30)
    with httpx.Client(base_url=own_address.url, timeout=10) as browser:
        signed_in(browser, holder, clock)
        page = browser.get("/portal/connect")
    program = _snippet(page, "snippet-mcp-sdk").replace(PLACEHOLDER, issued.api_key)
    ran = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert "pay_x402" in ran.stdout


def test_a_snippet_is_copied_with_its_button(
    chromium: Browser,
    server: LiveServer,
    browser: httpx.Client,
    runtime: Runtime,
    holder: accounts.CreatedAccount,
) -> None:
    signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    context = chromium.new_context(base_url=server.url)
    try:
        context.add_cookies(
            [
                {"name": c.name, "value": c.value or "", "url": server.url}
                for c in browser.cookies.jar
            ]
        )
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        page = context.new_page()
        page.goto("/portal/connect")
        shown = page.locator("#snippet-cursor").inner_text()
        page.locator('button[data-copy="snippet-cursor"]').click()
        expect(page.locator("#snippet-cursor-status")).to_have_text("Copied.")
        assert page.evaluate("navigator.clipboard.readText()") == shown.strip()
    finally:
        context.close()
