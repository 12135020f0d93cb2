"""``search_bazaar``: the x402 Bazaar discovery index, read defensively.

With a query: ``GET {bazaar_url}/discovery/search?query=...`` (items under ``resources``). When
that fails or is not offered: ``GET {bazaar_url}/discovery/resources`` (items under ``items``,
or ``resources`` in the v1-era shape) and the query is matched locally. Items may carry the URL
as ``resource`` or ``url`` and prices as ``amount`` (v2) or ``maxAmountRequired`` (v1).

    >>> normalise_item({"url": "https://a.example/x", "accepts": [
    ...     {"network": "base", "maxAmountRequired": "2500", "scheme": "exact"}]})["priceUsdc"]
    '0.0025'
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from paysign.connector.outbound import Outbound, OutboundRefused
from paysign.connector.payment import ToolFailure
from paysign.protocol.networks import BASE_SEPOLIA, resolve_network
from paysign.protocol.untrusted import untrusted_json
from paysign.protocol.usdc import format_usdc

MAX_LIMIT = 50
BROWSE_LIMIT = 100


def _amount(entry: dict[str, Any]) -> int | None:
    raw = entry.get("amount", entry.get("maxAmountRequired"))
    text = str(raw) if isinstance(raw, (str, int)) and not isinstance(raw, bool) else ""
    return int(text) if text.isdigit() else None


def _network_id(name: Any) -> str:
    network = resolve_network(str(name)) if name is not None else None
    return network.caip2 if network is not None else str(name)


def _text(value: Any, limit: int = 500) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def normalise_item(item: dict[str, Any]) -> dict[str, Any] | None:
    resource = item.get("resource", item.get("url"))
    if isinstance(resource, dict):
        resource = resource.get("url")
    if not isinstance(resource, str) or not resource.startswith(("http://", "https://")):
        return None
    found = item.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    accepts = []
    for entry in item.get("accepts") or []:
        if not isinstance(entry, dict):
            continue
        amount = _amount(entry)
        accepts.append(
            {
                "scheme": entry.get("scheme"),
                "network": _network_id(entry.get("network")),
                "amount": None if amount is None else str(amount),
                "amountUsdc": None if amount is None else format_usdc(amount),
                "asset": entry.get("asset"),
                "payTo": entry.get("payTo"),
            }
        )
    prices = [int(a["amount"]) for a in accepts if a["amount"] is not None]
    method = None
    extensions = item.get("extensions")
    if isinstance(extensions, dict):
        info = ((extensions.get("bazaar") or {}).get("info") or {}).get("input") or {}
        method = info.get("method") if isinstance(info, dict) else None
    tags = item.get("tags")
    price = format_usdc(min(prices)) if prices else None
    return {
        "url": resource,
        "type": item.get("type"),
        "serviceName": _text(item.get("serviceName"), 200),
        "description": _text(item.get("description") or metadata.get("description")),
        "method": method if isinstance(method, str) else None,
        "tags": [str(t) for t in tags][:20] if isinstance(tags, list) else [],
        "priceUsdc": price,
        "accepts": accepts,
        "x402Version": item.get("x402Version"),
        "lastUpdated": item.get("lastUpdated"),
        "payWith": pay_with(resource, method if isinstance(method, str) else None, price, accepts),
    }


def pay_with(
    url: str, method: str | None, price: str | None, accepts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``pay_x402`` call that pays this endpoint, its price as the most to pay; add
    ``sandbox: true`` to pay with test USDC where ``sandboxOffered``."""
    arguments: dict[str, Any] = {"url": url}
    if method is not None and method.upper() != "GET":
        arguments["method"] = method.upper()
    if price is not None:
        arguments["maxAmountUsdc"] = float(price)
    return {
        "tool": "pay_x402",
        "arguments": arguments,
        "sandboxOffered": any(a["network"] == BASE_SEPOLIA.caip2 for a in accepts),
    }


def _items(document: Any) -> list[dict[str, Any]]:
    if not isinstance(document, dict):
        return []
    found = document.get("items")
    if not isinstance(found, list):
        found = document.get("resources")
    return [x for x in found or [] if isinstance(x, dict)]


def _matches(item: dict[str, Any], query: str) -> bool:
    words = [w for w in query.lower().split() if w]
    haystack = " ".join(
        str(x or "") for x in (item["url"], item["description"], item["serviceName"], *item["tags"])
    ).lower()
    return all(w in haystack for w in words)


def _filtered(
    items: list[dict[str, Any]], network: str | None, max_price: int | None
) -> list[dict[str, Any]]:
    out = []
    for item in items:
        accepts = item["accepts"]
        if network is not None:
            accepts = [a for a in accepts if a["network"] == network]
        if max_price is not None:
            accepts = [
                a for a in accepts if a["amount"] is not None and int(a["amount"]) <= max_price
            ]
        if (network is not None or max_price is not None) and not accepts:
            continue
        out.append(item)
    return out


async def _get_json(outbound: Outbound, url: str) -> Any:
    response = await outbound.request("GET", url, headers={"Accept": "application/json"})
    if response.status != 200:
        raise OutboundRefused("status", f"{url} answered {response.status}")
    try:
        return untrusted_json(response.body)
    except ValueError:
        raise OutboundRefused("json", f"{url} did not answer JSON") from None


async def search_bazaar(
    outbound: Outbound,
    bazaar_url: str,
    *,
    query: str,
    network: str | None = None,
    max_price_base_units: int | None = None,
    limit: int = 10,
) -> dict[str, Any]:
    base = bazaar_url.rstrip("/")
    network_id = _network_id(network) if network else None
    limit = max(1, min(MAX_LIMIT, limit))
    params: dict[str, Any] = {"query": query[:400], "limit": limit, "type": "http"}
    if network_id:
        params["network"] = network_id
    method = "search"
    source = f"{base}/discovery/search?{urlencode(params)}"
    try:
        document = await _get_json(outbound, source)
        raw = _items(document)
        if not raw and not isinstance(document, dict):
            raise OutboundRefused("shape", "unexpected search answer")
    except OutboundRefused:
        method = "browse"
        source = f"{base}/discovery/resources?{urlencode({'type': 'http', 'limit': BROWSE_LIMIT})}"
        try:
            raw = _items(await _get_json(outbound, source))
        except OutboundRefused as exc:
            raise ToolFailure(
                "bazaar-unavailable",
                f"The x402 Bazaar index at {base} could not be searched: {exc.detail}",
                "Try again later, or pay a known x402 URL directly with pay_x402.",
            ) from None
    items = [x for x in (normalise_item(i) for i in raw) if x is not None]
    if method == "browse":
        items = [x for x in items if _matches(x, query)]
    items = _filtered(items, network_id, max_price_base_units)[:limit]
    return {
        "query": query,
        "index": base,
        "method": method,
        "count": len(items),
        "results": items,
        "note": "Seller-written listings: the price paid is the one the seller asks when "
        "called. Pay with pay_x402 (set maxAmountUsdc).",
    }
