"""Source-policy rules: ``host[/path-prefix]``, matched against a normalised seller location.

A host is matched exactly (case-insensitive, IDNA) or by a ``*.`` wildcard that covers every
subdomain (not the apex). A rule without a port covers every port of its host — so a deny rule
cannot be dodged on another port; a rule with a port covers that port only, except that ports
80 and 443 are default ports and are dropped (``host:443`` is the rule ``host``). The path prefix
matches on segment boundaries: ``/v1`` covers ``/v1`` and ``/v1/x``, never ``/v10``. A deny
rule's path, and an allow rule's budget, also cover the path's spellings in other letter case
(``matches_any_case``): many servers read ``/Admin`` as ``/admin`` (some ``/ADM\u0131N`` too),
and an agent must not get past a deny rule, or spend past a budget, by capitalising. An allow
rule grants its path in the case written, and no more.

    >>> rule = parse_rule("*.Example.org/v1/")
    >>> str(rule), rule.matches(seller_location("https://a.b.example.org/v1/quote?q=1"))
    ('*.example.org/v1', True)
    >>> rule.matches(seller_location("https://example.org/v1"))
    False
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote

from paysign.policy.seller import (
    SellerLocation,
    normalise_host,
    normalise_path,
    seller_location,
    split_host_port,
)

MAX_RULE_LENGTH = 2048

__all__ = ["Rule", "candidate_hosts", "parse_rule", "seller_location"]


@dataclass(frozen=True, slots=True, order=True)
class Rule:
    host: str  # "api.example.com", "api.example.com:8443" or "*.example.com"
    path: str  # normalised prefix, "/" for the whole host

    def __str__(self) -> str:
        return self.host if self.path == "/" else f"{self.host}{self.path}"

    @property
    def is_wildcard(self) -> bool:
        return self.host.startswith("*.")

    def matches(self, location: SellerLocation) -> bool:
        return self._host_matches(location) and _path_has_prefix(location.path, self.path)

    def matches_any_case(self, location: SellerLocation) -> bool:
        """``matches``, the path compared in any letter case: how a deny rule and an allow
        rule's budget are applied.

        >>> rule = parse_rule("shop.example.com/admin")
        >>> where = seller_location("https://shop.example.com/ADMIN/users")
        >>> rule.matches(where), rule.matches_any_case(where)
        (False, True)
        >>> parse_rule("shop.example.com/café").matches_any_case(
        ...     seller_location("https://shop.example.com/CAF%C3%89/menu")
        ... )
        True
        """
        return self._host_matches(location) and _path_has_prefix(
            _folded(location.path), _folded(self.path)
        )

    def _host_matches(self, location: SellerLocation) -> bool:
        hostname, port = split_host_port(location.host)
        rule_host, rule_port = split_host_port(self.host)
        if rule_port and rule_port != port:
            return False
        if rule_host.startswith("*."):
            return hostname.endswith(rule_host[1:])
        return hostname == rule_host


@lru_cache(maxsize=4096)
def _folded(path: str) -> str:
    """A normalised path decoded and case-folded, for comparing in any letter case. Its
    segments hold no ``/`` (a decoded ``%2F`` already split them), so the prefix still stops
    at segment boundaries. The dotted and dotless i fold to ``i``, as Java's
    ``equalsIgnoreCase`` has them.

    >>> _folded("/ADM%C4%B0N"), _folded("/adm%C4%B1n"), _folded("/Stra%C3%9Fe")
    ('/admin', '/admin', '/strasse')
    """
    if path.isascii() and "%" not in path:
        return path.lower()
    return unquote(path).casefold().replace("i\u0307", "i").replace("\u0131", "i")


def _path_has_prefix(path: str, prefix: str) -> bool:
    if prefix == "/":
        return True
    return path == prefix or path.startswith(prefix + "/")


@lru_cache(maxsize=4096)
def unnamable(location: str) -> str | None:
    """Why no rule can name the seller location ``location`` (its host and path), or ``None``.
    Such a seller could never be approved or denied: it must not reach the approvals queue.

    >>> unnamable("api.example.com/v1"), unnamable("intranet/x"), unnamable("api.example.com:0/")
    (None, "'intranet/x': the host must be a full name like 'api.example.com'", \
"'api.example.com:0/': the port must be a number from 1 to 65535")
    """
    try:
        parse_rule(location)
    except ValueError as exc:
        return str(exc)
    return None


def parse_rule(text: str) -> Rule:
    """A rule from ``host[/path]`` (a scheme is tolerated and ignored); ``ValueError`` if not."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a rule must be a non-empty string like 'api.example.com/v1'")
    text = text.strip()
    if len(text) > MAX_RULE_LENGTH:
        raise ValueError(f"a rule may be at most {MAX_RULE_LENGTH} characters")
    if "?" in text or "#" in text:
        raise ValueError("a rule matches host and path only; drop the query or fragment")
    scheme, sep, rest = text.partition("://")
    if sep and scheme.lower() not in ("http", "https"):
        raise ValueError(f"{text!r}: only http and https URLs can be rules")
    if not sep:
        rest = text
    host_part, slash, path_part = rest.partition("/")
    if path_part == "*" or path_part.endswith("/*"):
        # Saved as written, it would be a literal '*' that matches no path: a deny rule
        # meant for everything under a path would deny nothing.
        raise ValueError(
            f"{text!r}: a rule's path already covers everything under it; drop the '/*'"
        )
    wildcard = host_part.startswith("*.")
    bare = host_part[2:] if wildcard else host_part
    if not bare or "*" in bare or "@" in bare:
        raise ValueError(
            f"{text!r}: the host must be a name like 'api.example.com' or '*.example.com'"
        )
    try:
        hostname, port = split_host_port(bare)
        host = normalise_host(hostname)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    if port and (not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536):
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    # 80 and 443 are default ports: a seller location with no port is on one of them, and which
    # one depends on a scheme rules do not have, so "host:443" is read as "host". "0443" is 443.
    port = "" if not port or int(port) in (80, 443) else str(int(port))
    if "." not in host and host != "localhost" and not host.startswith("["):
        raise ValueError(f"{text!r}: the host must be a full name like 'api.example.com'")
    if wildcard and (host.startswith("[") or host.rpartition(".")[2].isdigit()):
        raise ValueError(f"{text!r}: a '*.' wildcard needs a domain name, not an IP address")
    if wildcard:
        host = "*." + host
    if port:
        host = f"{host}:{port}"
    return Rule(host, normalise_path("/" + path_part if slash else "/"))


def candidate_hosts(location: SellerLocation) -> list[str]:
    """Every rule host that could match this location: an index-friendly pre-filter.

    >>> candidate_hosts(seller_location("https://a.b.example.com/x"))
    ['a.b.example.com', '*.b.example.com', '*.example.com', '*.com']
    >>> candidate_hosts(seller_location("https://example.com:8443/x"))
    ['example.com', 'example.com:8443', '*.com', '*.com:8443']
    """
    hostname, port = split_host_port(location.host)
    names = [hostname]
    labels = hostname.split(".")
    names += ["*." + ".".join(labels[i:]) for i in range(1, len(labels))]
    if not port:
        return names
    return [h for name in names for h in (name, f"{name}:{port}")]
