"""Which listing a seller URL is: host equal, path equal segment by segment, a ``{placeholder}``
matching exactly one segment. Spelled the way the source policy normalises URLs, so the tier
the policy sees cannot be dodged by spelling either.

    >>> from paysign.policy.seller import seller_location
    >>> index = ListingIndex([("id-1", "https://api.example.com/v1", "/quote/{symbol}",
    ...                        Tier.STANDARD)])
    >>> index.tier_of(seller_location("https://API.example.com/v1/quote/ACME?x=1"))
    <Tier.STANDARD: 'STANDARD'>
    >>> index.tier_of(seller_location("https://api.example.com/v1/quote/ACME/extra"))
    <Tier.OPEN_ECOSYSTEM: 'OPEN_ECOSYSTEM'>
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from paysign.policy.decide import Tier
from paysign.policy.seller import SellerLocation, normalise_path, seller_location

_PLACEHOLDER = re.compile(r"^\{[A-Za-z0-9_-]+\}$")
ANY_SEGMENT = None


@dataclass(frozen=True, slots=True)
class PathTemplate:
    listing_id: str
    segments: tuple[str | None, ...]  # None matches any one segment
    tier: Tier

    def matches(self, segments: list[str]) -> bool:
        return len(segments) == len(self.segments) and all(
            want is None or want == got for want, got in zip(self.segments, segments, strict=True)
        )


def template_of(listing_id: str, url: str, path: str, tier: Tier) -> tuple[str, PathTemplate]:
    """The normalised host and segment template of a listing's ``url`` + ``path``."""
    base = seller_location(url)
    segments: list[str | None] = [s for s in base.path.split("/") if s]
    for raw in path.split("/"):
        if not raw:
            continue
        if _PLACEHOLDER.match(raw):
            segments.append(ANY_SEGMENT)
        else:
            segments.extend(s for s in normalise_path("/" + raw).split("/") if s)
    return base.host, PathTemplate(listing_id, tuple(segments), tier)


class ListingIndex:
    """Seller location → listing, from an in-memory snapshot of the catalog."""

    def __init__(self, listings: Iterable[tuple[str, str, str, Tier]]) -> None:
        self._by_host: dict[str, list[PathTemplate]] = {}
        for listing_id, url, path, tier in listings:
            host, template = template_of(listing_id, url, path, tier)
            self._by_host.setdefault(host, []).append(template)
        for templates in self._by_host.values():
            # Literal segments beat placeholders when two listings could both match.
            templates.sort(key=lambda t: sum(s is None for s in t.segments))

    def match(self, where: SellerLocation) -> PathTemplate | None:
        templates = self._by_host.get(where.host)
        if not templates:
            return None
        segments = [s for s in where.path.split("/") if s]
        return next((t for t in templates if t.matches(segments)), None)

    def tier_of(self, where: SellerLocation) -> Tier:
        found = self.match(where)
        return Tier.OPEN_ECOSYSTEM if found is None else found.tier
