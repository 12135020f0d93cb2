"""The catalog documents (spec 2.4): the public one (Premium and Standard listings only) and
the full file with all three tiers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from paysign.catalog.listing import Listing
from paysign.policy.decide import Tier

PUBLIC_TIERS = frozenset({Tier.PREMIUM, Tier.STANDARD})


@dataclass(frozen=True, slots=True)
class PaymentDetails:
    """How listings are paid, per network: the same fields a seller's ``accepts`` entry has."""

    network: str
    asset: str
    pay_to: str
    max_timeout_seconds: int
    token_name: str
    token_version: str

    def as_json(self) -> dict[str, Any]:
        return {
            "scheme": "exact",
            "network": self.network,
            "asset": self.asset,
            "payTo": self.pay_to,
            "maxTimeoutSeconds": self.max_timeout_seconds,
            "extra": {"name": self.token_name, "version": self.token_version},
        }


def catalog_document(
    listings: Iterable[Listing],
    *,
    live: Sequence[PaymentDetails],
    sandbox: Sequence[PaymentDetails],
    tiers: frozenset[Tier] = PUBLIC_TIERS,
) -> dict[str, Any]:
    return {
        "paymentDetails": [details.as_json() for details in live],
        "sandboxPaymentDetails": [details.as_json() for details in sandbox],
        "catalog": [listing.document for listing in listings if listing.tier in tiers],
    }
