"""Listings written to break the connector's tool list or the import: a name that ends in a
newline (published looking like a built-in tool), a listing named like a built-in (two tools of
one name, which clients refuse), and one nested too deeply to be stored."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import LiveServer, free_port, make_database_url, new_account, paysign
from paysign.app import create_app
from paysign.bootstrap import Runtime
from paysign.catalog.listing import parse_catalog_entries
from paysign.catalog.tool_names import BUILTIN_TOOL_NAMES
from paysign.config import Settings
from paysign.connector.builtin_tools import PAY_X402_TOOL, SEARCH_BAZAAR_TOOL, WALLET_STATUS_TOOL
from paysign.errors import InvalidCatalog
from paysign.services.catalog import demo_catalog, import_catalog, seed_demo_catalog

DEMO = demo_catalog("http://sellers.example")["catalog"]
STANDARD = next(i for i, entry in enumerate(DEMO) if entry["tier"] == "STANDARD")


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    yield from make_database_url("sqlite", tmp_path)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(port=free_port(), data_dir=tmp_path / "var", database_url=database_url)


def with_listing(**fields: Any) -> list[dict[str, Any]]:
    entries = copy.deepcopy(DEMO)
    entries[STANDARD].update(fields)
    return entries


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("name", ["pay_x402\n", "weather\n", "wallet_status", "search_bazaar"])
def test_a_name_a_tool_list_cannot_carry_is_refused(name: str) -> None:
    with pytest.raises(InvalidCatalog) as refused:
        parse_catalog_entries(with_listing(name=name))
    assert refused.value.extensions["pointer"] == f"/catalog/{STANDARD}/name"


def test_a_url_ending_in_a_newline_is_refused() -> None:
    entry = DEMO[STANDARD]
    with pytest.raises(InvalidCatalog) as refused:
        parse_catalog_entries(with_listing(url=entry["url"] + "\n"))
    assert refused.value.extensions["pointer"] == f"/catalog/{STANDARD}/url"


def test_every_tool_of_the_connector_is_a_reserved_name() -> None:
    listed = {PAY_X402_TOOL.name, SEARCH_BAZAAR_TOOL.name, WALLET_STATUS_TOOL.name}
    assert listed == BUILTIN_TOOL_NAMES


@pytest.mark.parametrize("extra", [nested(300), 2**70])
def test_a_listing_that_cannot_be_stored_is_refused_by_the_parser(extra: Any) -> None:
    with pytest.raises(InvalidCatalog) as refused:
        parse_catalog_entries(with_listing(notes=extra))
    assert refused.value.extensions["pointer"] == f"/catalog/{STANDARD}"


def test_importing_a_listing_named_wallet_status_leaves_tool_names_unique(
    runtime: Runtime,
) -> None:
    assert seed_demo_catalog(runtime.db, runtime.clock, "http://sellers.example")
    app = create_app(runtime)
    with LiveServer(app, runtime.settings.port):
        api_key = new_account(runtime)["api_key"]
        with pytest.raises(InvalidCatalog):
            import_catalog(
                runtime.db, runtime.clock, {"catalog": with_listing(name="wallet_status")}
            )

        async def tool_names() -> list[str]:
            headers = {"Authorization": f"Bearer {api_key}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(app.state.connector.mcp_url, http_client=http)) as c,
            ):
                return [tool.name for tool in (await c.list_tools()).tools]

        names = asyncio.run(asyncio.wait_for(tool_names(), 60))

    assert len(names) == len(set(names))
    assert set(names) >= BUILTIN_TOOL_NAMES


def test_importing_a_deeply_nested_listing_is_a_one_line_refusal(
    env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"catalog": with_listing(notes=nested(300))}))

    refused = paysign(env, "catalog", "import", str(path))

    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert f"/catalog/{STANDARD}" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
