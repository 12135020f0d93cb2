"""A listed seller held to its listing: the terms may not ask more than the listing's published
price, and must pay the catalog's published ``payTo`` for the terms' network.

A seller URL that matches a catalog listing is that listing, whatever the seller's endpoint
answers: a compromised or spoofed endpoint could otherwise name any amount or any payee, and
the agent (and the holder's allow rules, written for the listing) would pay it. A catalog that
publishes no payment details at all (no ``PAYSIGN_CATALOG_PAY_TO``) names no payee to hold a
seller to: its listings are held to their price only.

    >>> listed = ListedTerms("weather", 10_000, {"eip155:8453": bytes(19) + b"\\x01"})
    >>> listing_breach(listed, 10_000, "eip155:8453", bytes(19) + b"\\x01") is None
    True
    >>> listing_breach(listed, 10_001, "eip155:8453", bytes(19) + b"\\x01").kind
    'price-above-listing'
    >>> listing_breach(listed, 10_000, "eip155:8453", bytes(20)).kind
    'payee-mismatch'
    >>> listing_breach(listed, 10_000, "eip155:84532", bytes(19) + b"\\x01").expected is None
    True
    >>> listing_breach(ListedTerms("weather", 10_000, {}), 10_000, "eip155:8453", bytes(20))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class ListedTerms:
    """What a listing publishes about its payment."""

    listing: str  # the listing's name
    price: int  # base units
    #: CAIP-2 network -> the 20-byte address paid there; empty when the catalog names none.
    pay_to: Mapping[str, bytes]


@dataclass(frozen=True, slots=True)
class ListingBreach:
    kind: Literal["price-above-listing", "payee-mismatch"]
    listing: str
    #: The listing's price (base units), or the payee it publishes for the network as
    #: ``0x`` hex (``None`` when the catalog publishes no payment details for that network).
    expected: int | str | None


def listing_breach(
    listed: ListedTerms, amount: int, network: str, pay_to: bytes
) -> ListingBreach | None:
    """How terms of ``amount`` to ``pay_to`` on ``network`` break the listing, or ``None``.

    The payee is judged first: terms that pay someone else are refused whatever they ask.
    """
    expected = listed.pay_to.get(network)
    if listed.pay_to and expected != pay_to:
        shown = None if expected is None else "0x" + expected.hex()
        return ListingBreach("payee-mismatch", listed.listing, shown)
    if amount > listed.price:
        return ListingBreach("price-above-listing", listed.listing, listed.price)
    return None
