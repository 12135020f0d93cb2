"""Production and demo apart: a real ``paysign serve`` on a fresh data directory publishes no
catalog and no listing tools; ``paysign catalog import --prune`` and ``catalog remove`` take
listings away, their MCP tools with them (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from conftest import ServeProcess, ok_json, paysign
from paysign.services.catalog import demo_catalog

from .conftest import connect


def tool_names(url: str, api_key: str) -> set[str]:
    async def listed() -> set[str]:
        async with connect(f"{url}/mcp", api_key) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    return asyncio.run(asyncio.wait_for(listed(), 60))


def listed(url: str) -> dict[str, object]:
    return httpx.get(f"{url}/catalog/full.json").json()  # type: ignore[no-any-return]


def write(path: Path, entries: list[dict[str, object]]) -> str:
    path.write_text(json.dumps({"catalog": entries}))
    return str(path)


def api_key(env: dict[str, str]) -> str:
    email = "operator@example.com"
    ok_json(
        paysign(env, "admin", "create-account", "--email", email, "--password", "long enough pass")
    )
    return str(ok_json(paysign(env, "admin", "issue-key", "--email", email))["apiKey"])


def test_a_fresh_serve_publishes_nothing_and_pruning_takes_listings_and_tools_away(
    env: dict[str, str], tmp_path: Path
) -> None:
    demo = demo_catalog("https://sellers.example.com")["catalog"]
    everything = {entry["name"] for entry in demo}
    kept = [entry for entry in demo if entry["name"] in {"weather_forecast", "market_quote"}]
    with ServeProcess(env) as url:
        key = api_key(env)
        fresh = listed(url)
        assert fresh == {"paymentDetails": [], "sandboxPaymentDetails": [], "catalog": []}
        own = tool_names(url, key)  # the connector's own tools, whatever the catalog holds
        assert {"pay_x402", "search_bazaar"} <= own and not own & everything

        imported = paysign(env, "catalog", "import", write(tmp_path / "all.json", demo))
        assert ok_json(imported) == {"inserted": len(demo), "updated": 0}
        assert {"weather_forecast", "market_quote", "company_filings"} <= tool_names(url, key)

        pruned = paysign(env, "catalog", "import", write(tmp_path / "two.json", kept), "--prune")
        assert ok_json(pruned) == {
            "inserted": 0,
            "updated": 2,
            "removed": sorted(everything - {"weather_forecast", "market_quote"}),
        }
        assert {entry["name"] for entry in listed(url)["catalog"]} == {  # type: ignore[union-attr]
            "weather_forecast",
            "market_quote",
        }
        assert tool_names(url, key) == own | {"weather_forecast", "market_quote"}

        removed = paysign(env, "catalog", "remove", "weather_forecast")
        assert ok_json(removed) == {"removed": "weather_forecast"}
        assert tool_names(url, key) == own | {"market_quote"}
        again = paysign(env, "catalog", "remove", "weather_forecast")
        assert again.returncode == 1
        assert "no listing is called 'weather_forecast'" in again.stderr
        assert [entry["name"] for entry in listed(url)["catalog"]] == ["market_quote"]  # type: ignore[union-attr]


def test_a_refused_pruning_import_removes_nothing(env: dict[str, str], tmp_path: Path) -> None:
    demo = demo_catalog("https://sellers.example.com")["catalog"]
    ok_json(paysign(env, "catalog", "import", write(tmp_path / "all.json", demo)))
    broken = [dict(demo[0], name="bad name!")]
    refused = paysign(env, "catalog", "import", write(tmp_path / "bad.json", broken), "--prune")
    assert refused.returncode == 1 and "/catalog/0/name" in refused.stderr
    again = paysign(env, "catalog", "import", write(tmp_path / "all.json", demo))
    assert ok_json(again) == {"inserted": 0, "updated": len(demo)}


def test_pruning_to_an_empty_file_empties_the_catalog(env: dict[str, str], tmp_path: Path) -> None:
    demo = demo_catalog("https://sellers.example.com")["catalog"]
    ok_json(paysign(env, "catalog", "import", write(tmp_path / "all.json", demo)))
    emptied = ok_json(
        paysign(env, "catalog", "import", write(tmp_path / "none.json", []), "--prune")
    )
    assert emptied == {"inserted": 0, "updated": 0, "removed": sorted(e["name"] for e in demo)}
    again = ok_json(paysign(env, "catalog", "import", write(tmp_path / "none.json", []), "--prune"))
    assert again == {"inserted": 0, "updated": 0, "removed": []}
