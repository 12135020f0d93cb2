"""The pages behind the problem type URLs read as text for a human: code spans shown as code
(no raw Markdown backticks), everything else escaped, and the portal linked by its address."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Iterator

import httpx
import pytest

from conftest import LiveServer, free_port
from paysign.bootstrap import Runtime
from paysign.http.problems import PROBLEM_TYPES


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    """The app on a socket its settings name, so the addresses it writes are reachable."""
    from paysign.app import create_app

    port = free_port()
    settings = runtime.settings.model_copy(update={"port": port})
    with LiveServer(create_app(dataclasses.replace(runtime, settings=settings)), port) as live:
        yield live


def test_every_problem_page_renders_its_text(server: LiveServer) -> None:
    portal = f"{server.url}/portal"
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for slug, kind in PROBLEM_TYPES.items():
            page = http.get(f"/problems/{slug}")
            assert page.status_code == 200, slug
            assert page.headers["content-type"].startswith("text/html")
            assert "`" not in page.text, slug
            text = kind.explanation + kind.remedy
            for code in re.findall(r"`([^`]+)`", text):
                assert f"<code>{html.escape(code)}</code>" in page.text, (slug, code)
            assert f'portal: <a href="{portal}">{portal}</a>' in page.text, slug
            if re.search(r"the (paysign )?portal", text):
                assert re.search(rf'<a href="{portal}">the (paysign )?portal</a>', page.text), slug


def test_the_portal_link_leads_to_the_portal(server: LiveServer) -> None:
    page = httpx.get(f"{server.url}/problems/allow-pending").text
    href = re.search(r'<a href="([^"]+)">the paysign portal</a>', page)
    assert href is not None, page
    assert httpx.get(href.group(1), follow_redirects=True).status_code == 200


def test_an_unknown_problem_type_is_a_problem_document(server: LiveServer) -> None:
    answer = httpx.get(f"{server.url}/problems/no-such-thing")
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"
