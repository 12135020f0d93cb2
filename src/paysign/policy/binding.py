"""Terms bound to their seller: the resource the terms are for must be on the seller's host.

The source policy judges the declared ``sellerUrl``; the terms say which resource they pay for.
Terms taken from one seller and declared as another's would be judged as the other's, so the
resource's host (port included, after the one canonicalisation ``seller_host``) must be the
seller's. The path may differ: a seller may name its resource by a canonical URL.

    >>> unbound_resource("https://api.example.com/v1", (("/r", "https://API.example.com:443/x"),))
    >>> unbound_resource("https://api.example.com/v1", (("/r", "https://evil.example/x"),))
    UnboundResource(pointer='/r', seller_host='api.example.com', resource_host='evil.example', \
reason='names the host evil.example, not the seller api.example.com')

A relative resource URL is resolved against the seller's URL (so ``/x`` is on the seller's host,
``//evil.example/x`` is not). A URL of another scheme, such as MCP's ``mcp://tool/<name>``,
names no web host and is not compared: it could equally be left out (v1 terms need no
resource), so comparing it would stop nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

from paysign.policy.seller import seller_host


@dataclass(frozen=True, slots=True)
class UnboundResource:
    pointer: str  # where the request names the resource
    seller_host: str
    resource_host: str | None  # None when the URL's host is not a host at all
    reason: str


@lru_cache(maxsize=4096)
def unbound_resource(
    seller_url: str, resources: tuple[tuple[str, str], ...]
) -> UnboundResource | None:
    """The first of ``resources`` (``(pointer, url)`` pairs) not on ``seller_url``'s host, or
    ``None``. ``seller_url`` must be one ``seller_host`` accepts.

    Memoised like ``seller_location``: a seller's terms name the same resources each time.
    """
    seller = seller_host(seller_url)
    for pointer, url in resources:
        try:
            absolute = urljoin(seller_url, url)
        except ValueError:  # a broken "[...]" host
            return UnboundResource(pointer, seller, None, "has an invalid host")
        if urlsplit(absolute).scheme.lower() not in ("http", "https"):
            continue
        try:
            host = seller_host(absolute)
        except ValueError as exc:
            return UnboundResource(pointer, seller, None, str(exc))
        if host != seller:
            reason = f"names the host {host}, not the seller {seller}"
            return UnboundResource(pointer, seller, host, reason)
    return None
