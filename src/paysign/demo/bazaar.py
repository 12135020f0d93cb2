"""The demo's x402 Bazaar: a discovery index of the demo's Open Ecosystem sellers, served with
the API ``search_bazaar`` reads from the public index, so the Open Ecosystem half of paysign can
be tried offline. The sellers' app serves it at ``{sellers}/discovery/…``, and ``paysign demo``
points ``PAYSIGN_BAZAAR_URL`` at the sellers.

- ``GET /discovery/resources?type=http&limit=&offset=``: ``{"x402Version": 2, "items": [...],
  "pagination": {...}}``;
- ``GET /discovery/search?query=&type=http&limit=&network=``: ``{"x402Version": 2,
  "resources": [...], "partialResults": false}``, the items whose name, description or tags
  hold every word of the query.

Each item is a seller as the public index lists one: its URL (``resource``), both endpoints'
payment options (Base mainnet and Base Sepolia, in the seller's own x402 version), and the
``bazaar`` extension's input (the method).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from paysign.demo.terms import DemoListing, Mode, Terms
from paysign.policy.decide import Tier
from paysign.protocol.networks import resolve_network

MAX_LIMIT = 100


def _option(listing: DemoListing, terms: Terms, resource: str) -> dict[str, Any]:
    option: dict[str, Any] = {
        "scheme": "exact",
        "payTo": terms.pay_to,
        "asset": terms.asset,
        "maxTimeoutSeconds": terms.max_timeout_seconds,
        "extra": terms.extra,
    }
    if listing.x402_version == 1:
        option |= {
            "network": terms.v1_network,
            "maxAmountRequired": str(listing.price),
            "resource": resource,
            "description": listing.description,
            "mimeType": "application/json",
        }
    else:
        option |= {"network": terms.network, "amount": str(listing.price)}
    return option


def bazaar_item(listing: DemoListing, sellers_url: str, terms: dict[Mode, Terms]) -> dict[str, Any]:
    resource = sellers_url.rstrip("/") + listing.route_path
    modes: list[Mode] = ["production", "sandbox"] if listing.sandbox_available else ["production"]
    return {
        "resource": resource,
        "type": "http",
        "x402Version": listing.x402_version,
        "serviceName": listing.name,
        "description": listing.description,
        "tags": list(listing.listing.document.get("tags") or []),
        "accepts": [_option(listing, terms[mode], resource) for mode in modes],
        "extensions": {"bazaar": {"info": {"input": {"type": "http", "method": listing.method}}}},
    }


def _matches(item: dict[str, Any], query: str) -> bool:
    haystack = " ".join(
        [item["serviceName"], item["description"], item["resource"], *item["tags"]]
    ).lower()
    return all(word in haystack for word in query.lower().split())


def _limit(request: Request, default: int) -> int:
    try:
        return max(1, min(MAX_LIMIT, int(request.query_params.get("limit", default))))
    except ValueError:
        return default


def _network(name: str) -> str:
    network = resolve_network(name)
    return network.caip2 if network is not None else name


def bazaar_app(listings: list[DemoListing], terms: dict[Mode, Terms]) -> Starlette:
    """The index of ``listings``' Open Ecosystem sellers, on the origin it is asked at (the
    sellers'), mounted at ``/discovery``."""
    listed = [x for x in listings if x.listing.tier is Tier.OPEN_ECOSYSTEM]

    def items_for(request: Request) -> list[dict[str, Any]]:
        origin = f"{request.url.scheme}://{request.url.netloc}"
        return [bazaar_item(x, origin, terms) for x in listed]

    async def resources(request: Request) -> JSONResponse:
        items = items_for(request)
        limit = _limit(request, MAX_LIMIT)
        try:
            offset = max(0, int(request.query_params.get("offset", 0)))
        except ValueError:
            offset = 0
        return JSONResponse(
            {
                "x402Version": 2,
                "items": items[offset : offset + limit],
                "pagination": {"limit": limit, "offset": offset, "total": len(items)},
            }
        )

    async def search(request: Request) -> JSONResponse:
        query = request.query_params.get("query", "").strip()
        if not query:
            return JSONResponse({"error": "query is required"}, status_code=400)
        wanted = request.query_params.get("network")
        network = None if wanted is None else _network(wanted)
        found = [
            item
            for item in items_for(request)
            if _matches(item, query)
            and (network is None or any(_network(a["network"]) == network for a in item["accepts"]))
        ]
        return JSONResponse(
            {
                "x402Version": 2,
                "resources": found[: _limit(request, 10)],
                "partialResults": False,
            }
        )

    return Starlette(
        routes=[
            Route("/resources", resources, methods=["GET"]),
            Route("/search", search, methods=["GET"]),
        ]
    )
