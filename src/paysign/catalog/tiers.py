"""Which tier a seller belongs to: the seam the catalog plugs into.

Until listings are stored, no seller URL matches a listing, so every seller is Open Ecosystem
(DESIGN 7.5): the strictest reading, since Open Ecosystem sellers need approval by default.
"""

from __future__ import annotations

from typing import Protocol

from paysign.policy.decide import Tier
from paysign.policy.seller import SellerLocation


class TierLookup(Protocol):
    def tier_of(self, where: SellerLocation) -> Tier: ...


class NoListings:
    def tier_of(self, where: SellerLocation) -> Tier:
        return Tier.OPEN_ECOSYSTEM
