"""The connector's own tools: ``pay_x402`` (any x402 URL), ``search_bazaar`` (the discovery
index) and ``wallet_status`` (the budget), and the checks of their arguments."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import mcp_types as types
from starlette.concurrency import run_in_threadpool

from paysign.catalog.tool_names import PAY_X402, SEARCH_BAZAAR, WALLET_STATUS
from paysign.connector.payment import SellerCall, ToolFailure
from paysign.connector.results import PAID_CALL_OUTPUT, SEARCH_OUTPUT, STATUS_OUTPUT
from paysign.connector.tools import json_body, sandbox_flag
from paysign.errors import PaysignError
from paysign.protocol.usdc import base_units_at_most
from paysign.services.budget import Budget

_SANDBOX_HEADER = "x-sandbox-mode"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")


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


#: What HTTP/1.1 allows in a header's name (a token) and value (visible ASCII, space and tab).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")


def _header(name: str, value: Any) -> tuple[str, str]:
    text = _scalar(f"headers.{name}", value)
    if not _HEADER_NAME.fullmatch(name) or not _HEADER_VALUE.fullmatch(text):
        raise ToolFailure(
            "invalid-arguments",
            f"The header {name[:100]!r} cannot be sent: a header's name is letters, digits and "
            "-, and its value printable ASCII on one line.",
            "Fix the header and call again.",
            argument="headers",
        )
    return name, text


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
            argument=name,
        ) from None


def pay_x402_call(arguments: dict[str, Any], service_id: str | None) -> SellerCall:
    known_arguments_only(PAY_X402_TOOL, arguments)
    url = arguments.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ToolFailure(
            "invalid-arguments",
            "url must be an http(s) URL.",
            "Fix the URL and call again.",
            argument="url",
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
    headers = dict(
        _header(str(k), v)
        for k, v in raw_headers.items()
        if str(k).lower()
        not in {_SANDBOX_HEADER, "payment-signature", "x-payment", "host", "content-length"}
    )
    body = json_body(arguments.get("body"))
    if body is not None and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    return SellerCall(
        method,
        url,
        headers,
        body,
        sandbox=sandbox_flag(arguments),
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
        "additionalProperties": False,
    },
    output_schema=PAID_CALL_OUTPUT,
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
        "additionalProperties": False,
    },
    output_schema=SEARCH_OUTPUT,
)


WALLET_STATUS_TOOL = types.Tool(
    name=WALLET_STATUS,
    title="What the wallet can still spend",
    description=(
        "The user's paysign budget, read before paying: what is left under the per-payment, "
        "daily and monthly spend caps and when each resets, whether spending is frozen, which "
        "sellers wait for the user's approval (and whether a given seller is one of them), "
        "the sandbox (test USDC) balance, and when the API key expires. Costs nothing."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "seller": {
                "type": "string",
                "description": "A seller's URL: also say whether it waits for approval.",
            },
        },
        "additionalProperties": False,
    },
    output_schema=STATUS_OUTPUT,
)


def status_seller(arguments: dict[str, Any]) -> str | None:
    known_arguments_only(WALLET_STATUS_TOOL, arguments)
    seller = arguments.get("seller")
    if seller is None:
        return None
    if not isinstance(seller, str):
        raise ToolFailure(
            "invalid-arguments",
            "The argument 'seller' must be a seller's URL.",
            "Fix the argument and call again.",
            argument="seller",
        )
    return seller


def known_arguments_only(tool: types.Tool, arguments: dict[str, Any]) -> None:
    """Refuse an argument the tool's schema does not declare: ignoring it would run a call
    other than the one the model meant."""
    known = tool.input_schema.get("properties") or {}
    for name in arguments:
        if name not in known:
            raise ToolFailure(
                "invalid-arguments",
                f"The argument {name!r} is not an argument of {tool.name} (it takes "
                f"{', '.join(known)}). Nothing was signed or paid.",
                "Fix the argument as the tool's input schema describes and call again.",
                argument=name,
            )


@dataclass(frozen=True, slots=True)
class BazaarSearch:
    query: str
    network: str | None
    max_price: int | None
    limit: int


def bazaar_search(arguments: dict[str, Any]) -> BazaarSearch:
    known_arguments_only(SEARCH_BAZAAR_TOOL, arguments)
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolFailure(
            "invalid-arguments",
            "The argument 'query' is required: a few words saying what to look for.",
            "Call again with a query.",
            argument="query",
        )
    network = arguments.get("network")
    if network is not None and not isinstance(network, str):
        raise ToolFailure(
            "invalid-arguments",
            "The argument 'network' must be a string such as eip155:8453.",
            "Fix the argument and call again.",
            argument="network",
        )
    limit = arguments.get("limit", 10)
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50:
        raise ToolFailure(
            "invalid-arguments",
            "The argument 'limit' must be a whole number from 1 to 50.",
            "Fix the argument and call again.",
            argument="limit",
        )
    return BazaarSearch(
        query,
        network or None,
        usdc_amount("maxPriceUsdc", arguments.get("maxPriceUsdc")),
        limit,
    )


async def wallet_status(
    budget: Budget, account_id: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    seller = status_seller(arguments)
    try:
        # It asks the sandbox chain for the balance: off the event loop.
        status = await run_in_threadpool(budget.status, account_id, seller=seller)
    except PaysignError as exc:
        raise ToolFailure(exc.slug, exc.detail, "Ask the user to check their account.") from None
    return status.document()
