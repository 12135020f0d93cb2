"""Calling a listed service (spec 4.3): find the listing, build its request, pay, return.

The URL is the listing's ``url`` followed by its ``path`` with the ``{placeholders}`` filled;
every other input goes where the listing says (query, header, or the JSON body of a POST):

    >>> listing = Listing.from_document({
    ...     "name": "weather_forecast", "url": "https://w.example/weather",
    ...     "path": "/v1/forecast/{city}", "method": "GET", "tier": "STANDARD",
    ...     "priceUsdc": 0.002, "sandboxAvailable": True, "tags": ["weather"],
    ...     "inputs": {"path": [{"key": "city", "required": True}],
    ...                "query": [{"key": "units", "required": False}], "header": []}})
    >>> call = build_listing_request(listing, {"city": "São Paulo", "units": "metric"},
    ...                              sandbox=True)
    >>> call.method, call.url, call.query, call.headers
    ('GET', 'https://w.example/weather/v1/forecast/S%C3%A3o%20Paulo', {'units': 'metric'}, \
{'X-Sandbox-Mode': 'true'})
    >>> build_listing_request(listing, {"units": "metric"}, sandbox=False)
    Traceback (most recent call last):
    ...
    paysign.client.errors.ListingError: weather_forecast needs the path input 'city'
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import httpx

from paysign.client.auth import payment_of
from paysign.client.clients import AsyncPaysignClient, PaysignClient
from paysign.client.errors import ListingError
from paysign.client.payment import Payment
from paysign.client.wire import SANDBOX_HEADER
from paysign.protocol.usdc import base_units_at_most

__all__ = [
    "CallResult",
    "Listing",
    "ListingRequest",
    "acall_listing",
    "build_listing_request",
    "call_listing",
    "filter_listings",
    "find_listing",
    "listings_of",
]


@dataclass(frozen=True, slots=True)
class Listing:
    """One catalog entry (spec 2.4); ``document`` is the entry as published."""

    name: str
    url: str
    path: str
    method: str
    tier: str
    price_usdc: Decimal
    sandbox_available: bool
    tags: tuple[str, ...]
    description: str
    document: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, entry: Mapping[str, Any]) -> Listing:
        try:
            return cls(
                name=str(entry["name"]),
                url=str(entry["url"]),
                path=str(entry.get("path") or ""),
                method=str(entry.get("method") or "GET").upper(),
                tier=str(entry.get("tier") or ""),
                price_usdc=Decimal(str(entry.get("priceUsdc", 0))),
                sandbox_available=entry.get("sandboxAvailable") is True,
                tags=tuple(str(t) for t in entry.get("tags") or ()),
                description=str(entry.get("description") or ""),
                document=dict(entry),
            )
        except (KeyError, TypeError, ArithmeticError) as exc:
            raise ListingError(f"a catalog listing cannot be read: {exc!r}") from None

    @property
    def price(self) -> int:
        """The published price in USDC base units (rounded down to a unit)."""
        return base_units_at_most(self.price_usdc)

    def inputs(self, kind: str) -> list[dict[str, Any]]:
        inputs = self.document.get("inputs")
        items = inputs.get(kind) if isinstance(inputs, dict) else None
        return [i for i in items if isinstance(i, dict) and "key" in i] if items else []

    @property
    def free_form_body(self) -> bool:
        """A POST listing whose ``inputs.body`` is not a list of keyed items (its shape is
        not fixed by the spec): any input not placed elsewhere goes into the body."""
        inputs = self.document.get("inputs")
        body = inputs.get("body") if isinstance(inputs, dict) else None
        return self.method == "POST" and not (
            isinstance(body, list) and all(isinstance(i, dict) and "key" in i for i in body)
        )


def listings_of(catalog: Mapping[str, Any]) -> list[Listing]:
    entries = catalog.get("catalog")
    if not isinstance(entries, list):
        raise ListingError("the catalog document has no 'catalog' array")
    return [Listing.from_document(e) for e in entries if isinstance(e, dict)]


def filter_listings(
    listings: Iterable[Listing], *, tier: str | None = None, tags: Iterable[str] = ()
) -> list[Listing]:
    """Listings of ``tier`` (any case) carrying every tag of ``tags`` (any case)."""
    wanted = {t.lower() for t in tags}
    return [
        listing
        for listing in listings
        if (tier is None or listing.tier.upper() == tier.upper())
        and wanted <= {t.lower() for t in listing.tags}
    ]


def find_listing(catalog: Mapping[str, Any], name: str) -> Listing:
    listings = listings_of(catalog)
    for listing in listings:
        if listing.name == name:
            return listing
    names = [listing.name for listing in listings]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; listed: {', '.join(names)}"
    raise ListingError(f"no listing named {name!r} in the catalog{hint}")


@dataclass(frozen=True, slots=True)
class ListingRequest:
    method: str
    url: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any] | None  # the JSON body of a POST listing


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def build_listing_request(
    listing: Listing, params: Mapping[str, Any], *, sandbox: bool
) -> ListingRequest:
    """The request for ``listing`` with ``params`` (input key → value); :class:`ListingError`
    for an unknown key, a missing required input, or a sandbox the listing does not have."""
    if sandbox and not listing.sandbox_available:
        raise ListingError(
            f"{listing.name} has no sandbox (sandboxAvailable: false); call it without sandbox"
        )
    remaining = dict(params)
    path = listing.path
    query: dict[str, str] = {}
    headers: dict[str, str] = {}
    body: dict[str, Any] | None = {} if listing.method == "POST" else None

    def take(item: dict[str, Any], kind: str) -> Any:
        key = str(item["key"])
        match = key if key in remaining else None
        if match is None and kind == "header":
            match = next((k for k in remaining if k.lower() == key.lower()), None)
        if match is None:
            if item.get("required") is True:
                raise ListingError(f"{listing.name} needs the {kind} input {key!r}")
            return None
        return remaining.pop(match)

    for item in listing.inputs("path"):
        value = take(item, "path")
        if value is not None:
            path = path.replace("{" + str(item["key"]) + "}", quote(_text(value), safe=""))
    for item in listing.inputs("query"):
        value = take(item, "query")
        if value is not None:
            query[str(item["key"])] = _text(value)
    for item in listing.inputs("header"):
        if str(item["key"]).lower() == SANDBOX_HEADER.lower():
            take({**item, "required": False}, "header")  # set by ``sandbox``, never by hand
            continue
        value = take(item, "header")
        if value is not None:
            headers[str(item["key"])] = _text(value)
    if body is not None:
        for item in listing.inputs("body"):
            value = take(item, "body")
            if value is not None:
                body[str(item["key"])] = value
        if listing.free_form_body:
            body.update(remaining)
            remaining.clear()
    if "{" in path:
        raise ListingError(f"{listing.name}: the path {path!r} still has a placeholder")
    if remaining:
        known = sorted(
            str(i["key"])
            for kind in ("path", "query", "header", "body")
            for i in listing.inputs(kind)
        )
        raise ListingError(
            f"{listing.name} has no input {', '.join(map(repr, remaining))}; "
            f"its inputs: {', '.join(known) or 'none'}"
        )
    if sandbox:
        headers[SANDBOX_HEADER] = "true"
    return ListingRequest(listing.method, listing.url.rstrip("/") + path, query, headers, body)


@dataclass(frozen=True, slots=True)
class CallResult:
    """The seller's answer to a listing call, and the payment made for it."""

    listing: Listing
    response: httpx.Response
    payment: Payment | None

    @property
    def ok(self) -> bool:
        return self.response.is_success

    @property
    def data(self) -> Any:
        """The answer's JSON, or its text when it is not JSON."""
        try:
            return self.response.json()
        except ValueError:
            return self.response.text


def _send_args(call: ListingRequest) -> dict[str, Any]:
    args: dict[str, Any] = {"params": call.query, "headers": call.headers}
    if call.body is not None:
        args["json"] = call.body
    return args


def call_listing(
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    client: PaysignClient | None = None,
    sandbox: bool = False,
    max_amount: int | None = None,
    catalog: Mapping[str, Any] | None = None,
    api_key: str | None = None,
    paysign_url: str | None = None,
) -> CallResult:
    """Call the catalog listing ``name`` with ``params``, paying through paysign.

    Without ``client``, one is made from ``api_key``/``paysign_url`` (or the environment) with
    ``sandbox`` and ``max_amount``; with one, its own settings apply. ``catalog`` defaults to
    the service's ``GET /buyers/catalog``.
    """
    own = client is None
    http = client or PaysignClient(
        api_key, paysign_url=paysign_url, sandbox=sandbox, max_amount=max_amount
    )
    try:
        listing = find_listing(catalog if catalog is not None else http.signer.catalog(), name)
        call = build_listing_request(listing, params or {}, sandbox=http.paysign_auth.sandbox)
        response = http.request(call.method, call.url, **_send_args(call))
        return CallResult(listing, response, payment_of(response))
    finally:
        if own:
            http.close()


async def acall_listing(
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    client: AsyncPaysignClient | None = None,
    sandbox: bool = False,
    max_amount: int | None = None,
    catalog: Mapping[str, Any] | None = None,
    api_key: str | None = None,
    paysign_url: str | None = None,
) -> CallResult:
    """:func:`call_listing` for asyncio."""
    own = client is None
    http = client or AsyncPaysignClient(
        api_key, paysign_url=paysign_url, sandbox=sandbox, max_amount=max_amount
    )
    try:
        document = catalog if catalog is not None else await http.signer.acatalog()
        listing = find_listing(document, name)
        call = build_listing_request(listing, params or {}, sandbox=http.paysign_auth.sandbox)
        response = await http.request(call.method, call.url, **_send_args(call))
        return CallResult(listing, response, payment_of(response))
    finally:
        if own:
            await http.aclose()
