"""A catalog listing: one paid endpoint of a seller, validated as the catalog file states it.

Names double as MCP tool names, so they follow the strictest common rule
(``^[A-Za-z0-9_-]{1,64}$``) and may not take the connector's own tool names.

    >>> listing = parse_listing({
    ...     "id": "0b7f9a52-3c1e-4f6e-9d8a-2f1c5b7e9a10", "name": "weather_forecast",
    ...     "url": "https://weather.example.com", "path": "/v1/forecast/{city}",
    ...     "description": "Hourly forecast", "priceUsdc": 0.01, "method": "GET",
    ...     "tier": "STANDARD", "sandboxAvailable": True,
    ...     "inputs": {"path": [{"key": "city", "description": "City", "required": True}],
    ...                "query": [], "header": []},
    ...     "tags": ["weather"]}, 0)
    >>> listing.name, listing.tier.value, listing.price_base_units
    ('weather_forecast', 'STANDARD', 10000)
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from paysign.catalog.inputs import check_input_item
from paysign.catalog.match import template_of
from paysign.catalog.tool_names import BUILTIN_TOOL_NAMES
from paysign.errors import InvalidCatalog
from paysign.policy.decide import Tier
from paysign.policy.seller import seller_location
from paysign.protocol.usdc import base_units_of

# Matched whole (``fullmatch``): ``match`` would let ``$`` accept a name ending in a newline.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_LISTING_URL = re.compile(r"https?://[^/?#\s]+(/[^?#\s]*)?")
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_-]+)\}")
_SOURCE_FIELDS = ("freshnessBand", "uptime", "license", "underlyingSource")
_INPUT_KINDS = ("path", "query", "header")
# Stands in for each {placeholder} when a listing's URL is checked: the connector fills it with
# one percent-encoded argument, so only what the listing spells itself can make it unjudgeable.
_SAMPLE_ARGUMENT = "x"


@dataclass(frozen=True, slots=True)
class Listing:
    id: str
    name: str
    url: str
    path: str
    tier: Tier
    price_usdc: Decimal
    document: dict[str, Any]  # the entry exactly as published (spec 2.4 fields)

    @property
    def price_base_units(self) -> int:
        return base_units_of(self.price_usdc)

    @property
    def sandbox_available(self) -> bool:
        return bool(self.document.get("sandboxAvailable"))

    def path_placeholders(self) -> list[str]:
        return _PLACEHOLDER.findall(self.path)


def _require(entry: dict[str, Any], key: str, kind: type | tuple[type, ...], at: str) -> Any:
    if key not in entry:
        raise InvalidCatalog(f"{at}/{key}", "is required")
    value = entry[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        raise InvalidCatalog(f"{at}/{key}", f"must be {_type_name(kind)}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _type_name(kind: type | tuple[type, ...]) -> str:
    names = {
        str: "a string",
        bool: "true or false",
        list: "an array",
        dict: "an object",
        int: "a number",
        float: "a number",
    }
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in _as_tuple(kind)))


def _inputs(entry: dict[str, Any], at: str, method: str) -> None:
    inputs = _require(entry, "inputs", dict, at)
    # A body in another shape than a list of fields is passed through as one JSON object.
    body_fields = ("body",) if isinstance(inputs.get("body"), list) else ()
    for kind in (*_INPUT_KINDS, *body_fields):
        items = _require(inputs, kind, list, f"{at}/inputs")
        seen: set[str] = set()
        for i, item in enumerate(items):
            where = f"{at}/inputs/{kind}/{i}"
            if not isinstance(item, dict):
                raise InvalidCatalog(where, "must be an object with key, description, required")
            key = _require(item, "key", str, where)
            _require(item, "description", str, where)
            _require(item, "required", bool, where)
            check_input_item(item, where)
            if not key or key in seen:
                raise InvalidCatalog(f"{where}/key", f"{key!r} is empty or repeated")
            seen.add(key)
    if method == "POST" and "body" not in inputs:
        raise InvalidCatalog(f"{at}/inputs/body", "is required for a POST listing")


def _judgeable(at: str, name: str, url: str, path: str, tier: Tier) -> None:
    """Refuse a listing whose URL the source policy cannot judge: the connector would refuse
    every call to it, and the catalog's tier index, built from every listing at start and after
    each import, would fail to build, failing the start and every signing request with it."""
    try:
        seller_location(url)
    except ValueError as exc:
        raise InvalidCatalog(
            f"{at}/url", f"listing {name!r}: the source policy cannot judge {url[:300]!r}: it {exc}"
        ) from None
    called = url.rstrip("/") + _PLACEHOLDER.sub(_SAMPLE_ARGUMENT, path)
    try:
        seller_location(called)
        template_of("", url, path, tier)
    except ValueError as exc:
        raise InvalidCatalog(
            f"{at}/path",
            f"listing {name!r}: the source policy cannot judge {called[:300]!r} (each "
            f"{{placeholder}} written as {_SAMPLE_ARGUMENT!r}): it {exc}",
        ) from None


def _storable(entry: dict[str, Any], at: str) -> None:
    """Refuse an entry that cannot be written back as JSON (nested too deeply for the encoder,
    an integer beyond 64 bits): it is stored and served as part of a catalog document, so it is
    encoded here as one, where the refusal can name the listing."""
    try:
        orjson.dumps({"catalog": [entry]})
    except orjson.JSONEncodeError as exc:
        raise InvalidCatalog(at, f"cannot be stored as JSON: {exc}") from None


def parse_listing(entry: object, index: int) -> Listing:
    """Validate one catalog entry; ``InvalidCatalog`` names the entry and the field."""
    at = f"/catalog/{index}"
    if not isinstance(entry, dict):
        raise InvalidCatalog(at, "each listing must be an object")
    listing_id = _require(entry, "id", str, at)
    try:
        if str(uuid.UUID(listing_id)) != listing_id.lower():
            raise ValueError
    except ValueError:
        raise InvalidCatalog(f"{at}/id", f"{listing_id!r} is not a UUID") from None
    name = _require(entry, "name", str, at)
    if not TOOL_NAME.fullmatch(name):
        raise InvalidCatalog(
            f"{at}/name", f"{name!r} is not a valid tool name (1-64 of A-Z a-z 0-9 _ -)"
        )
    if name in BUILTIN_TOOL_NAMES:
        raise InvalidCatalog(f"{at}/name", f"{name!r} is the name of a built-in connector tool")
    url = _require(entry, "url", str, at)
    if not _LISTING_URL.fullmatch(url):
        raise InvalidCatalog(f"{at}/url", "must be an absolute http(s) URL without query")
    path = _require(entry, "path", str, at)
    if path and not path.startswith("/"):
        raise InvalidCatalog(f"{at}/path", "must start with '/'")
    _require(entry, "description", str, at)
    price = _require(entry, "priceUsdc", (int, float), at)
    try:
        price_usdc = Decimal(str(price))
    except InvalidOperation:
        raise InvalidCatalog(f"{at}/priceUsdc", "must be a number") from None
    try:
        base_units_of(price_usdc)
    except ValueError:
        raise InvalidCatalog(f"{at}/priceUsdc", "must be ≥ 0 with at most 6 decimals") from None
    method = _require(entry, "method", str, at)
    if method not in ("GET", "POST"):
        raise InvalidCatalog(f"{at}/method", "must be GET or POST")
    tier_name = _require(entry, "tier", str, at)
    try:
        tier = Tier(tier_name)
    except ValueError:
        raise InvalidCatalog(f"{at}/tier", "must be PREMIUM, STANDARD or OPEN_ECOSYSTEM") from None
    _require(entry, "sandboxAvailable", bool, at)
    _inputs(entry, at, method)
    tags = _require(entry, "tags", list, at)
    if not all(isinstance(t, str) for t in tags):
        raise InvalidCatalog(f"{at}/tags", "must be an array of strings")
    placeholders = set(_PLACEHOLDER.findall(path))
    declared = {item["key"] for item in entry["inputs"]["path"]}
    if placeholders != declared:
        raise InvalidCatalog(
            f"{at}/inputs/path",
            f"path placeholders {sorted(placeholders)} and path inputs {sorted(declared)} differ",
        )
    if tier is Tier.PREMIUM:
        source = _require(entry, "source", dict, at)
        for field in _SOURCE_FIELDS:
            _require(source, field, (str, int, float), f"{at}/source")
    _judgeable(at, name, url, path, tier)
    _storable(entry, at)
    return Listing(listing_id.lower(), name, url, path, tier, price_usdc, dict(entry))


def parse_catalog_entries(entries: object) -> list[Listing]:
    """All listings of a catalog file's ``catalog`` array: ids and names unique."""
    if not isinstance(entries, list):
        raise InvalidCatalog("/catalog", "must be an array of listings")
    listings = [parse_listing(entry, i) for i, entry in enumerate(entries)]
    for attribute in ("id", "name"):
        seen: dict[str, int] = {}
        for i, listing in enumerate(listings):
            value = getattr(listing, attribute)
            if value in seen:
                raise InvalidCatalog(
                    f"/catalog/{i}/{attribute}",
                    f"{value!r} is also the {attribute} of listing {seen[value]}",
                )
            seen[value] = i
    return listings
