"""Tool definitions: one per Premium/Standard catalog listing, plus ``pay_x402`` and
``search_bazaar``; and the translation of a tool call's arguments into a seller call.

Open Ecosystem listings get no tool of their own: the public catalog (spec 4.3) leaves them out,
they are unvetted, and by default each one needs the account holder's approval. They are found
with ``search_bazaar`` and paid with ``pay_x402``, which is what spec 1 says those tools are for.

    >>> from decimal import Decimal
    >>> from paysign.policy.decide import Tier
    >>> from paysign.catalog.listing import Listing
    >>> doc = {"description": "Forecast.", "method": "GET", "sandboxAvailable": True,
    ...        "inputs": {"path": [{"key": "city", "description": "City", "required": True}],
    ...                   "query": [{"key": "units", "description": "Units", "required": False}],
    ...                   "header": [{"key": "X-Sandbox-Mode", "description": "",
    ...                               "required": False}]}}
    >>> listing = Listing("id-1", "weather", "https://w.example.com", "/v1/{city}", Tier.STANDARD,
    ...                   Decimal("0.002"), doc)
    >>> tool = listing_tool(listing)
    >>> sorted(tool.input_schema["properties"]), tool.input_schema["required"]
    (['city', 'sandbox', 'units'], ['city'])
    >>> listing_call(listing, {"city": "São Paulo", "units": "metric", "sandbox": True}).url
    'https://w.example.com/v1/S%C3%A3o%20Paulo?units=metric'
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlencode

import mcp_types as types

from paysign.catalog.listing import Listing
from paysign.connector.payment import SellerCall, ToolFailure
from paysign.policy.decide import Tier
from paysign.protocol.usdc import base_units_at_most, format_usdc

PAY_X402 = "pay_x402"
SEARCH_BAZAAR = "search_bazaar"
TOOL_TIERS = frozenset({Tier.PREMIUM, Tier.STANDARD})
_SANDBOX_HEADER = "x-sandbox-mode"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")


def _inputs(listing: Listing, kind: str) -> list[dict[str, Any]]:
    inputs = listing.document.get("inputs") or {}
    found = inputs.get(kind) or []
    return [x for x in found if isinstance(x, dict) and isinstance(x.get("key"), str)]


def _argument_map(listing: Listing) -> list[tuple[str, str, dict[str, Any]]]:
    """``(argument name, kind, input)`` for every input; a header whose key clashes with an
    earlier argument is exposed as ``header_<key>``."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    seen: set[str] = {"sandbox", "body"}
    for kind in ("path", "query", "header"):
        for item in _inputs(listing, kind):
            key = item["key"]
            if kind == "header" and key.lower() == _SANDBOX_HEADER:
                continue  # the `sandbox` flag sets it
            name = key if key not in seen else f"{kind}_{key}"
            seen.add(name)
            out.append((name, kind, item))
    return out


def listing_description(listing: Listing) -> str:
    doc = listing.document
    method = str(doc.get("method", "GET")).upper()
    tier = listing.tier.value.capitalize()
    parts = [
        str(doc.get("description", "")).strip(),
        f"Paid API ({tier} tier of the paysign catalog): each call costs "
        f"{format_usdc(listing.price_base_units)} USDC, paid automatically from the "
        "user's paysign wallet on Base, within their source policy and spend caps.",
        f"Calls {method} {listing.url}{listing.path}.",
    ]
    if listing.sandbox_available:
        parts.append("Set sandbox=true to pay with test USDC on Base Sepolia instead.")
    tags = doc.get("tags")
    if isinstance(tags, list) and tags:
        parts.append("Tags: " + ", ".join(str(t) for t in tags) + ".")
    return " ".join(p for p in parts if p)


def listing_tool(listing: Listing) -> types.Tool:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, kind, item in _argument_map(listing):
        text = str(item.get("description") or item["key"])
        properties[name] = {"type": "string", "description": f"{text} ({kind} parameter)"}
        if item.get("required") is True:
            required.append(name)
    if str(listing.document.get("method", "GET")).upper() == "POST":
        properties["body"] = {
            "type": "object",
            "description": "The JSON request body sent to the seller.",
        }
    if listing.sandbox_available:
        properties["sandbox"] = {
            "type": "boolean",
            "default": False,
            "description": "true: pay with test USDC on Base Sepolia (the seller's sandbox).",
        }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return types.Tool(
        name=listing.name,
        title=listing.name.replace("_", " "),
        description=listing_description(listing),
        input_schema=schema,
    )


def _scalar(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ToolFailure(
        "invalid-arguments",
        f"The argument {name!r} must be a string or a number.",
        "Fix the argument and call again.",
    )


def _sandbox_flag(arguments: dict[str, Any]) -> bool:
    value = arguments.get("sandbox", False)
    if value in (None, False, "false"):
        return False
    if value in (True, "true"):
        return True
    raise ToolFailure(
        "invalid-arguments", "sandbox must be true or false.", "Fix the argument and call again."
    )


def _json_body(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


def listing_call(listing: Listing, arguments: dict[str, Any]) -> SellerCall:
    path = listing.path
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    missing: list[str] = []
    for name, kind, item in _argument_map(listing):
        value = arguments.get(name)
        if value is None:
            if item.get("required") is True:
                missing.append(name)
            continue
        text = _scalar(name, value)
        if kind == "path":
            path = path.replace("{" + item["key"] + "}", quote(text, safe=""))
        elif kind == "query":
            query.append((item["key"], text))
        else:
            headers[item["key"]] = text
    if missing:
        raise ToolFailure(
            "invalid-arguments",
            f"Missing required argument(s): {', '.join(missing)}.",
            "Call again with every required argument.",
        )
    sandbox = _sandbox_flag(arguments)
    if sandbox and not listing.sandbox_available:
        raise ToolFailure(
            "sandbox-unavailable",
            f"{listing.name} has no sandbox.",
            "Call again without sandbox (a live, paid call) or choose another tool.",
        )
    method = str(listing.document.get("method", "GET")).upper()
    body = _json_body(arguments.get("body")) if method == "POST" else None
    if body is not None:
        headers["Content-Type"] = "application/json"
    url = listing.url.rstrip("/") + path + (("?" + urlencode(query)) if query else "")
    return SellerCall(
        method,
        url,
        headers,
        body,
        sandbox=sandbox,
        max_amount=listing.price_base_units,
        service_id=listing.id,
    )


def usdc_amount(name: str, value: Any) -> int | None:
    """A limit the agent wrote in USDC (``0.01``, ``"0.01"``) as base units, digits finer than
    a base unit dropped."""
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        return base_units_at_most(Decimal(str(value)))
    except (ValueError, ArithmeticError):
        raise ToolFailure(
            "invalid-arguments",
            f"{name} must be a non-negative number of USDC.",
            "Fix the argument and call again.",
        ) from None


def pay_x402_call(arguments: dict[str, Any], service_id: str | None) -> SellerCall:
    url = arguments.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ToolFailure(
            "invalid-arguments", "url must be an http(s) URL.", "Fix the URL and call again."
        )
    method = str(arguments.get("method") or "GET").upper()
    if method not in _METHODS:
        raise ToolFailure(
            "invalid-arguments",
            f"method must be one of {', '.join(_METHODS)}.",
            "Fix the argument and call again.",
        )
    raw_headers = arguments.get("headers") or {}
    if not isinstance(raw_headers, dict):
        raise ToolFailure(
            "invalid-arguments",
            "headers must be an object of header names to values.",
            "Fix the argument and call again.",
        )
    headers = {
        str(k): _scalar(f"headers.{k}", v)
        for k, v in raw_headers.items()
        if str(k).lower()
        not in {_SANDBOX_HEADER, "payment-signature", "x-payment", "host", "content-length"}
    }
    body = _json_body(arguments.get("body"))
    if body is not None and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    return SellerCall(
        method,
        url,
        headers,
        body,
        sandbox=_sandbox_flag(arguments),
        max_amount=usdc_amount("maxAmountUsdc", arguments.get("maxAmountUsdc")),
        service_id=service_id,
    )


PAY_X402_TOOL = types.Tool(
    name=PAY_X402,
    title="Pay an x402 endpoint",
    description=(
        "Call any HTTP endpoint that charges with x402 (for example one found with "
        "search_bazaar), paying it in USDC from the user's paysign wallet on Base: the seller's "
        "402 terms are read, signed within the user's source policy and spend caps, and the "
        "call is repeated with the payment. New sellers usually need the user's approval in "
        "the paysign portal first. Set maxAmountUsdc to refuse a higher price before anything "
        "is signed; sandbox=true pays with test USDC on Base Sepolia."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The endpoint's full http(s) URL."},
            "method": {"type": "string", "enum": list(_METHODS), "default": "GET"},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Extra request headers.",
            },
            "body": {"description": "Request body: a JSON value (sent as JSON) or a string."},
            "sandbox": {"type": "boolean", "default": False},
            "maxAmountUsdc": {
                "type": "number",
                "minimum": 0,
                "description": "The most to pay for this call, in USDC.",
            },
        },
        "required": ["url"],
    },
)

SEARCH_BAZAAR_TOOL = types.Tool(
    name=SEARCH_BAZAAR,
    title="Search the x402 Bazaar",
    description=(
        "Search the public x402 Bazaar discovery index for paid HTTP endpoints (Open "
        "Ecosystem sellers). Returns each endpoint's URL, description and prices; pay one with "
        "pay_x402. Listings are written by the sellers themselves: the price actually paid is "
        "the one the seller asks when called."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "network": {
                "type": "string",
                "description": "Only endpoints paid on this network (eip155:8453 = Base, "
                "eip155:84532 = Base Sepolia).",
            },
            "maxPriceUsdc": {"type": "number", "minimum": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
        },
        "required": ["query"],
    },
)


def catalog_tools(listings: tuple[Listing, ...] | list[Listing]) -> list[types.Tool]:
    return [listing_tool(x) for x in listings if x.tier in TOOL_TIERS]
