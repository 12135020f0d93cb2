"""The catalog's tools, one per Premium/Standard listing, and the translation of a tool call's
arguments into a seller call (the connector's own tools are in ``builtin_tools.py``).

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
from typing import Any
from urllib.parse import quote, urlencode

import mcp_types as types

from paysign.catalog.inputs import SANDBOX_ARGUMENT, Argument, InvalidArgument, ListingInputs
from paysign.catalog.listing import Listing
from paysign.connector.payment import SellerCall, ToolFailure
from paysign.connector.results import PAID_CALL_OUTPUT
from paysign.policy.decide import Tier
from paysign.protocol.usdc import format_usdc

TOOL_TIERS = frozenset({Tier.PREMIUM, Tier.STANDARD})


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
    inputs = ListingInputs.of(listing.document)
    return types.Tool(
        name=listing.name,
        title=listing.name.replace("_", " "),
        description=listing_description(listing),
        input_schema=inputs.schema(sandbox=listing.sandbox_available),
        output_schema=PAID_CALL_OUTPUT,
    )


def sandbox_flag(arguments: dict[str, Any]) -> bool:
    value = arguments.get("sandbox", False)
    if value in (None, False, "false"):
        return False
    if value in (True, "true"):
        return True
    raise ToolFailure(
        "invalid-arguments",
        "The argument 'sandbox' must be true or false.",
        "Fix the argument and call again.",
        argument="sandbox",
    )


def json_body(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


def _text(argument: Argument, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if argument.type == "integer":
        return str(int(value))
    return str(value)


def checked_arguments(listing: Listing, arguments: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments checked against the listing's inputs, before anything is signed."""
    if sandbox_flag(arguments) and not listing.sandbox_available:
        raise ToolFailure(
            "sandbox-unavailable",
            f"{listing.name} has no sandbox.",
            "Call again without sandbox (a live, paid call) or choose another tool.",
            argument=SANDBOX_ARGUMENT,
        )
    try:
        return ListingInputs.of(listing.document).check(arguments)
    except InvalidArgument as exc:
        raise ToolFailure(
            "invalid-arguments",
            f"The argument {exc.argument!r} {exc.reason}. Nothing was signed or paid.",
            "Fix the argument as the tool's input schema describes and call again.",
            argument=exc.argument,
        ) from None


def listing_call(listing: Listing, arguments: dict[str, Any]) -> SellerCall:
    values = checked_arguments(listing, arguments)
    sandbox = sandbox_flag(arguments)
    path = listing.path
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    fields: dict[str, Any] = {}
    whole_body: Any = None
    for argument in ListingInputs.of(listing.document).arguments:
        if argument.name not in values:
            continue
        value = values[argument.name]
        if argument.kind == "body":
            if argument.type == "object":
                whole_body = value
            else:
                fields[argument.key] = value
        elif argument.kind == "path":
            path = path.replace("{" + argument.key + "}", quote(_text(argument, value), safe=""))
        elif argument.kind == "query":
            query.append((argument.key, _text(argument, value)))
        else:
            headers[argument.key] = _text(argument, value)
    method = str(listing.document.get("method", "GET")).upper()
    body = None
    if method == "POST":
        body = json_body(fields) if fields else json_body(whole_body)
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


def catalog_tools(listings: tuple[Listing, ...] | list[Listing]) -> list[types.Tool]:
    return [listing_tool(x) for x in listings if x.tier in TOOL_TIERS]
