"""What a rule would match, shown before it is saved: the sellers this account has met, the
catalog's listings, and a few example URLs — every verdict from the matcher the signing path
uses (``Rule.matches``), so the preview cannot disagree with what the rule will do.

Reading is bounded whatever the account's size: the newest ``PREVIEW_SCAN`` signatures and
refusals, pre-filtered by host in SQL (a superset: any host a rule matches contains the rule's
host name), then matched here, and at most ``SHOWN`` of each list are shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from paysign.catalog.match import template_of
from paysign.policy.rules import Rule, parse_rule
from paysign.policy.seller import SellerLocation, seller_location, split_host_port
from paysign.protocol.usdc import format_usdc
from paysign.services.portal_deps import PortalDeps
from paysign.store import activity_repo, catalog_repo, policy_repo

PREVIEW_SCAN = 10_000
SEEN_LIMIT = 2_000
SHOWN = 20


@dataclass(frozen=True, slots=True)
class Example:
    url: str
    why: str
    matches: bool


@dataclass(frozen=True, slots=True)
class Match:
    what: str  # a seller (host/path) or a listing's URL
    note: str = ""


@dataclass(slots=True)
class Preview:
    kind: Literal["allow", "deny"]
    rule: str | None = None  # the rule as it would be saved; None when invalid
    error: str | None = None
    on_list: str | None = None  # "allow" or "deny" when the rule is there already
    sellers: list[Match] = field(default_factory=list)
    more_sellers: int = 0
    listings: list[Match] = field(default_factory=list)
    more_listings: int = 0
    examples: list[Example] = field(default_factory=list)
    #: Spending is frozen: no rule lets anything through until it is unfrozen.
    frozen: bool = False


def examples(rule: Rule, kind: Literal["allow", "deny"] = "allow") -> list[Example]:
    """Example URLs around the rule's edges (subdomains, longer and look-alike paths, ports,
    spelling, letter case), each with the verdict of the rule as a ``kind`` rule.

    >>> [(e.url, e.matches) for e in examples(parse_rule("api.example.com/v1"))][:4]
    [('https://api.example.com/v1', True), ('https://api.api.example.com/v1', False), \
('https://api.example.com/v1/more?q=1', True), ('https://api.example.com/v1x', False)]
    """
    hostname, port = split_host_port(rule.host)
    wildcard = hostname.startswith("*.")
    domain = hostname.removeprefix("*.")
    named = not domain.startswith("[") and not domain.rpartition(".")[2].isdigit()
    on_port = f":{port}" if port else ""
    host = f"api.{domain}" if wildcard else domain  # a host the rule is about
    at = host + on_port
    path = rule.path
    candidates: list[tuple[str, str]] = []
    if wildcard:
        candidates += [
            (f"https://{at}{path}", "a subdomain"),
            (f"https://a.b.{domain}{on_port}{path}", "a subdomain of a subdomain"),
            (f"https://{domain}{on_port}{path}", "the domain itself, with no subdomain"),
        ]
    else:
        candidates.append((f"https://{at}{path}", "exactly the rule"))
        if named:
            candidates.append((f"https://api.{domain}{on_port}{path}", "a subdomain"))
    candidates.append((f"https://{at}{path.rstrip('/')}/more?q=1", "a longer path, a query"))
    if path != "/":
        parent = path.rsplit("/", 1)[0] or "/"
        candidates += [
            (f"https://{at}{path}x", "a path that only starts with the same letters"),
            (f"https://{at}{parent}", "a shorter path"),
            (f"https://{at}/x/..{path}", "the same path spelled another way"),
        ]
    if port:
        candidates.append((f"https://{host}{path}", "the default port"))
    else:
        candidates.append((f"https://{host}:8443{path}", "another port"))
    if named:
        candidates.append((f"https://{at.upper()}{path}", "capital letters in the host"))
    if path.lower() != path.upper():
        candidates.append((f"https://{at}{path.swapcase()}", "the path in other letter case"))
    applies = rule.matches_any_case if kind == "deny" else rule.matches
    found: list[Example] = []
    for url, why in candidates:
        try:
            where = seller_location(url)
        except ValueError:
            continue  # an edge this rule's host cannot have (e.g. a too-long name)
        if all(example.url != url for example in found):
            found.append(Example(url, why, applies(where)))
    return found


def _note(
    where: SellerLocation, kind: str, allow: list[Rule], deny: list[Rule], pending: set[str]
) -> str:
    """What else decides this seller: a deny rule is applied before any allow rule."""
    if kind == "allow":
        blocking = next((d for d in deny if d.matches_any_case(where)), None)
        if blocking is not None:
            return f"still refused: deny rule {blocking} comes first"
    else:
        overridden = next((a for a in allow if a.matches(where)), None)
        if overridden is not None:
            return f"refused even though allow rule {overridden} matches"
    return "waiting for your approval" if str(where) in pending else ""


def preview(
    deps: PortalDeps, account_id: str, text: str, kind: Literal["allow", "deny"]
) -> Preview:
    """The preview of ``text`` as a ``kind`` rule; ``error`` set (the same message saving
    gives) when it is not a rule."""
    result = Preview(kind)
    try:
        rule = parse_rule(text)
    except ValueError as exc:
        result.error = str(exc)
        return result
    result.rule = str(rule)
    result.examples = examples(rule, kind)
    applies = rule.matches_any_case if kind == "deny" else rule.matches
    needle = split_host_port(rule.host.removeprefix("*."))[0]
    with deps.db.read() as conn:
        document = policy_repo.load_document(conn, account_id)
        seen = activity_repo.seen_sellers(
            conn, account_id, needle, scan=PREVIEW_SCAN, limit=SEEN_LIMIT
        )
        listings = catalog_repo.all_listings(conn)
    allow, deny = list(document.allow), list(document.deny)
    result.frozen = document.settings.frozen
    result.on_list = "allow" if rule in allow else "deny" if rule in deny else None
    pending = set(document.pending)
    sellers = [
        Match(str(where), _note(where, kind, allow, deny, pending))
        for where in (SellerLocation(host, path) for host, path in seen)
        if applies(where)
    ]
    result.sellers, result.more_sellers = sellers[:SHOWN], max(len(sellers) - SHOWN, 0)
    matched: list[Match] = []
    for listing in listings:
        try:
            host, template = template_of(listing.id, listing.url, listing.path, listing.tier)
        except ValueError:
            continue
        # Every call to the listing shares the path up to its first {placeholder}: the rule
        # covers the listing when it matches that fixed part.
        fixed = []
        for segment in template.segments:
            if segment is None:
                break
            fixed.append(segment)
        if applies(SellerLocation(host, "/" + "/".join(fixed))):
            url = listing.url.rstrip("/") + listing.path
            # A listed seller is paid at most its price, to the catalog's payee, whatever
            # the rules say: the preview says so, as the signing path will hold it to that.
            note = (
                f"{listing.name} ({listing.tier.value.lower()}; paid at most its listed "
                f"{format_usdc(listing.price_base_units)} USDC)"
            )
            matched.append(Match(url, note))
    result.listings, result.more_listings = matched[:SHOWN], max(len(matched) - SHOWN, 0)
    return result
