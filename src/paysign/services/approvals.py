"""The approvals queue as the holder reads it and decides on it: one page at a time, oldest
first, each seller with what there is to know before paying it (its latest terms, its catalog
listing if it has one, how often it was refused) and the rules that would approve or deny it —
this exact path, a shorter path prefix, or the whole host.

The queue is bounded (``policy.decide.MAX_PENDING_SELLERS``), but an account that filled it
before the bound existed may hold more, and each entry is a table row with a form: a page keeps
what the browser receives small whatever the queue holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from paysign.catalog.listing import Listing
from paysign.errors import InvalidPolicy
from paysign.policy.rules import Rule, parse_rule
from paysign.policy.seller import SellerLocation
from paysign.services import policy_edits
from paysign.services.catalog import CatalogSnapshot
from paysign.services.portal_deps import PortalDeps
from paysign.store import policy_repo
from paysign.store.database import Database
from paysign.store.policy_repo import PendingSeller


class Listings(Protocol):
    """The catalog (``services.catalog.Catalog``): its up-to-date snapshot, read once a page."""

    def current(self) -> CatalogSnapshot: ...


@dataclass(frozen=True, slots=True)
class Scope:
    """One rule the holder may choose to decide a pending seller with."""

    rule: str
    #: ``"path"`` (this exact path and below), ``"prefix"`` or ``"host"``.
    kind: Literal["path", "prefix", "host"]


@dataclass(frozen=True, slots=True)
class PendingDecision:
    seller: PendingSeller
    #: How the seller is named in forms and notices: ``host`` or ``host/path``.
    name: str
    #: The catalog listing the seller is, if any.
    listing: Listing | None
    #: Narrowest first; the first is the seller's own path.
    scopes: list[Scope]


@dataclass(frozen=True, slots=True)
class PendingPage:
    sellers: list[PendingDecision]
    #: This page's number (from 1) and how many there are (at least 1, even when empty).
    page: int
    pages: int
    #: How many sellers are waiting in all.
    total: int


def scopes_of(location: SellerLocation) -> list[Scope]:
    """The rules that approve ``location``, narrowest first.

    >>> [(s.kind, s.rule) for s in scopes_of(SellerLocation("api.example.com", "/v1/quote/x"))]
    [('path', 'api.example.com/v1/quote/x'), ('prefix', 'api.example.com/v1/quote'), \
('prefix', 'api.example.com/v1'), ('host', 'api.example.com')]
    >>> [s.rule for s in scopes_of(SellerLocation("api.example.com", "/"))]
    ['api.example.com']
    """
    segments = [s for s in location.path.split("/") if s]
    found: list[Scope] = []
    for end in range(len(segments), 0, -1):
        kind: Literal["path", "prefix"] = "path" if end == len(segments) else "prefix"
        found.append(Scope(f"{location.host}/{'/'.join(segments[:end])}", kind))
    found.append(Scope(location.host, "host"))
    return found


def _decisions(sellers: list[PendingSeller], listings: Listings) -> list[PendingDecision]:
    """Each seller with the listing it is, matched the way signing matches it (the catalog
    snapshot's index), in one snapshot for the whole page."""
    snapshot = listings.current()
    locations = [SellerLocation(s.host, s.path) for s in sellers]
    matched = [snapshot.index.match(location) for location in locations]
    by_id = {x.id: x for x in snapshot.listings} if any(matched) else {}
    return [
        PendingDecision(
            seller,
            seller.host if seller.path == "/" else str(location),
            None if found is None else by_id.get(found.listing_id),
            scopes_of(location),
        )
        for seller, location, found in zip(sellers, locations, matched, strict=True)
    ]


def pending_page(
    db: Database, listings: Listings, account_id: str, *, page: int, size: int
) -> PendingPage:
    """Page ``page`` of ``size`` sellers; a page past the end is the last one (after a decision
    emptied it, the holder sees what is left rather than nothing)."""
    with db.read() as conn:
        total = policy_repo.pending_count(conn, account_id)
        pages = max(1, -(-total // size))
        page = min(max(page, 1), pages)
        sellers = policy_repo.pending_of(conn, account_id, offset=(page - 1) * size, limit=size)
    return PendingPage(_decisions(sellers, listings), page, pages, total)


def scoped_rule(seller: str, scope: str) -> Rule:
    """The rule ``scope`` names for deciding ``seller``: one of ``scopes_of`` the seller (no
    wildcard, no other host, no other path), so a form cannot be made to write a rule wider
    than the choices it offered. An empty ``scope`` is the seller itself. ``InvalidPolicy``
    otherwise."""
    try:
        decided = parse_rule(seller)
    except ValueError as exc:
        raise InvalidPolicy("/seller", f"nothing was changed: {exc}") from None
    if not scope.strip():
        return decided
    location = SellerLocation(decided.host, decided.path)
    try:
        chosen = parse_rule(scope)
    except ValueError as exc:
        raise InvalidPolicy("/scope", f"nothing was changed: {exc}") from None
    if all(parse_rule(s.rule) != chosen for s in scopes_of(location)):
        raise InvalidPolicy(
            "/scope",
            f"nothing was changed: {chosen} is not a path of {location.host} "
            f"that {decided} lies under",
        )
    return chosen


def decide(
    deps: PortalDeps,
    account_id: str,
    seller: str,
    scope: str,
    kind: Literal["allow", "deny"],
    code: str = "",
) -> str:
    """Approve (allow list) or deny (deny list) ``seller`` by the rule ``scope`` names, settling
    every pending seller that rule covers; returns the rule written. Approving loosens the
    policy, so it needs a fresh authenticator code, checked only once the rule is known to be
    valid. Raises ``InvalidPolicy`` (nothing changed, no code spent) or ``CredentialsRefused``."""
    rule = scoped_rule(seller, scope)
    (written,) = policy_edits.decide_many(deps, account_id, [str(rule)], kind, code)
    return written
