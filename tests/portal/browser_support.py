"""Debian's headless Chromium under Playwright, for the portal's browser tests.

One browser per test module: Playwright's sync driver runs an event loop in the test thread
while it lives, so a second driver cannot start beside it, and the tests after it that run
their own loop (``asyncio.run``) would fail if it outlived its module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
# The sandbox is off because CI runs as root, where Chromium refuses to start with it; the rest
# keeps a shared CI machine quiet (no GPU, no /dev/shm limits, no calls home).
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    # A failure, not a skip: without the browser the portal would go unchecked unnoticed.
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} not found: the browser tests need Debian's chromium package "
            "(`make test` installs it; or: apt-get install --no-install-recommends chromium)",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()
