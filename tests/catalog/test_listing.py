"""Catalog validation: every refusal names the offending entry and field."""

from __future__ import annotations

import copy

import pytest

from paysign.catalog.listing import parse_catalog_entries
from paysign.errors import InvalidCatalog
from paysign.services.catalog import demo_catalog

DEMO = demo_catalog("http://127.0.0.1:8403")["catalog"]


def test_demo_catalog_is_valid_and_covers_every_tier() -> None:
    listings = parse_catalog_entries(DEMO)
    assert {x.tier.value for x in listings} == {"PREMIUM", "STANDARD", "OPEN_ECOSYSTEM"}
    assert any(x.document["method"] == "POST" for x in listings)
    # Every demo listing can be tried in the sandbox (a listing without one is parsed in
    # tests/client and tests/connector).
    assert all(x.sandbox_available for x in listings)


def changed(index: int, **fields: object) -> list[dict]:
    entries = copy.deepcopy(DEMO)
    for key, value in fields.items():
        if value is None:
            del entries[index][key]
        else:
            entries[index][key] = value
    return entries


@pytest.mark.parametrize(
    ("entries", "pointer"),
    [
        (changed(0, id="not-a-uuid"), "/catalog/0/id"),
        (changed(1, name="has space"), "/catalog/1/name"),
        (changed(1, name="x" * 65), "/catalog/1/name"),
        (changed(2, name="pay_x402"), "/catalog/2/name"),
        (changed(2, name=None), "/catalog/2/name"),
        (changed(2, url="ftp://x.example"), "/catalog/2/url"),
        (changed(2, path="no-slash"), "/catalog/2/path"),
        (changed(2, priceUsdc=-1), "/catalog/2/priceUsdc"),
        (changed(2, priceUsdc=0.0000001), "/catalog/2/priceUsdc"),
        (changed(2, priceUsdc="0.01"), "/catalog/2/priceUsdc"),
        (changed(2, method="PUT"), "/catalog/2/method"),
        (changed(2, tier="GOLD"), "/catalog/2/tier"),
        (changed(2, sandboxAvailable="yes"), "/catalog/2/sandboxAvailable"),
        (changed(2, tags=["ok", 3]), "/catalog/2/tags"),
        (changed(0, source=None), "/catalog/0/source"),
        (changed(2, inputs={"path": [], "query": [], "header": []}), "/catalog/2/inputs/path"),
        (changed(3, inputs={"path": [], "query": [], "header": []}), "/catalog/3/inputs/body"),
        (changed(1, name=DEMO[0]["name"]), "/catalog/1/name"),
        (changed(1, id=DEMO[0]["id"]), "/catalog/1/id"),
    ],
)
def test_each_invalid_entry_is_named(entries: list[dict], pointer: str) -> None:
    with pytest.raises(InvalidCatalog) as refused:
        parse_catalog_entries(entries)
    assert refused.value.extensions["pointer"] == pointer


def test_the_catalog_must_be_an_array() -> None:
    with pytest.raises(InvalidCatalog):
        parse_catalog_entries({"catalog": DEMO})


@pytest.mark.parametrize(
    ("field", "value", "pointer", "part"),
    [
        ("path", "/v1/forecast/{city}/file.", "/catalog/2/path", "ending in a dot"),
        ("path", "/v1/forecast/{city}%20", "/catalog/2/path", "ending in a dot or a space"),
        ("path", "/v1/%00/{city}", "/catalog/2/path", "control character"),
        ("path", "/v1/%252e%252e/{city}", "/catalog/2/path", "doubly percent-encoded"),
        ("path", "/v1/%C0%AE/{city}", "/catalog/2/path", "not UTF-8"),
        ("url", 'http://sell"ers.example/weather', "/catalog/2/url", "character no host"),
        ("url", "http://sellers.example/weather./", "/catalog/2/url", "ending in a dot"),
        ("url", "http://[::ffff:a00:1/weather", "/catalog/2/url", "IPv6 address"),
    ],
)
def test_a_listing_whose_url_the_policy_cannot_judge_is_refused(
    field: str, value: str, pointer: str, part: str
) -> None:
    with pytest.raises(InvalidCatalog) as refused:
        parse_catalog_entries(changed(2, **{field: value}))
    assert refused.value.extensions["pointer"] == pointer
    assert "'weather_forecast'" in refused.value.detail and part in refused.value.detail


@pytest.mark.parametrize(
    "path",
    [
        "/v1/forecast/{city}",  # a placeholder is checked as an argument, not as "{city}"
        "/v1;v=2/forecast/{city}",  # ";parameters" are dropped, as sellers' servers route
        "/v1/forecast/{city}.json",
        "/v1/forecast/caf%C3%A9/{city}",
    ],
)
def test_a_path_the_policy_can_judge_is_accepted(path: str) -> None:
    listings = parse_catalog_entries(changed(2, path=path))
    assert listings[2].path == path
