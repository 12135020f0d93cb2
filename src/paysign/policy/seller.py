"""Where a payment goes, as the source policy sees it: a normalised host and path.

The query string and fragment never matter. The host is lower-cased, IDNA-encoded, and loses a
default port and a trailing dot; IP addresses are written one way only. The path is
percent-decoded once and re-encoded one way (``%C3%A9`` and ``é``, ``%21`` and ``!`` are the
same), ``%2F`` or ``\\`` read as ``/`` (servers that decode them route there), and dot segments
and empty segments are removed, so ``/a/../b``, ``/%62`` and ``/a%2F..%2Fb`` are all ``/b`` — a
rule cannot be dodged by spelling.

    >>> seller_location("https://API.Example.com:443/v1/../v2/quote?x=1#f")
    SellerLocation(host='api.example.com', path='/v2/quote')
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, unquote, unquote_to_bytes, urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
# What a path segment may hold unescaped (RFC 3986 pchar); everything else is %XX-escaped.
_PCHAR_SAFE = "!$&'()*+,;=:@"
# A last label that WHATWG URL parsers read as a number makes the host an IPv4 address.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
# IDNA 2003 (Python's codec) maps these away; IDNA 2008 and browsers keep them, so the same
# spelling would name two different hosts. They are refused rather than guessed.
_IDNA_DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")


def split_host_port(host: str) -> tuple[str, str]:
    """``("api.example.com", "8443")`` from ``api.example.com:8443``; IPv6 stays bracketed."""
    if host.startswith("["):
        end = host.find("]") + 1
        if end == 0 or host[end : end + 1] not in ("", ":"):
            raise ValueError("has an IPv6 address not written like [2001:db8::1]:8443")
        return host[:end], host[end + 1 :]
    name, _, port = host.partition(":")
    return name, port


@dataclass(frozen=True, slots=True)
class SellerLocation:
    host: str
    path: str

    def __str__(self) -> str:
        return f"{self.host}{self.path}"


@lru_cache(maxsize=4096)
def seller_location(url: str) -> SellerLocation:
    """``ValueError`` when the URL has no http(s) scheme or no host.

    Memoised: agents pay the same few sellers over and over, and the answer (an immutable
    value) depends on the string alone. Errors are not cached.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("must be an absolute http or https URL")
    if "\\" in parts.netloc:
        # Browsers read "https://a.com\@b.com/" as host a.com, Python as host b.com.
        raise ValueError("has a backslash before the path; which host is meant is ambiguous")
    host = normalise_host(parts.hostname)
    port = parts.port  # raises ValueError for a non-numeric or out-of-range port
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return SellerLocation(host, normalise_path(parts.path))


def normalise_host(hostname: str) -> str:
    try:
        hostname = unquote(hostname, errors="strict").rstrip(".").lower().strip("[]")
    except UnicodeDecodeError:
        raise ValueError("has a host name that is not valid UTF-8") from None
    if _is_ipv6(hostname):
        try:
            return f"[{ipaddress.IPv6Address(hostname).compressed}]"
        except ValueError:
            raise ValueError("has an invalid IPv6 address") from None
    if not hostname or any(
        c in "/\\@%:?#[]" or not c.isprintable() or c.isspace() for c in hostname
    ):
        raise ValueError("has an invalid host name")
    if not hostname.isascii():
        if _IDNA_DEVIATIONS.intersection(hostname):
            raise ValueError(
                "has a host name with ß, ς or a zero-width joiner, which IDNA versions encode "
                "differently; write the host in its xn-- form"
            )
        try:
            hostname = hostname.encode("idna").decode("ascii").rstrip(".")
        except UnicodeError:
            raise ValueError("has a host name that is not valid IDNA") from None
    if _NUMERIC_LABEL.fullmatch(hostname.rpartition(".")[2]):
        # "127.1", "0x7f.0.0.1" and "2130706433" are all 127.0.0.1 to a browser.
        try:
            ipaddress.IPv4Address(hostname)
        except ValueError:
            raise ValueError("has an IPv4 address not written like 192.0.2.1") from None
    return hostname


def _is_ipv6(hostname: str) -> bool:
    return ":" in hostname and all(c in "0123456789abcdef:." for c in hostname)


def normalise_path(path: str) -> str:
    """Decode once, split on ``/`` (and ``\\``), resolve dot segments, re-encode one way."""
    out: list[str] = []
    for segment in unquote_to_bytes(path).replace(b"\\", b"/").split(b"/"):
        if segment in (b"", b"."):
            continue
        if segment == b"..":
            if out:
                out.pop()
            continue
        out.append(quote(segment, safe=_PCHAR_SAFE))
    return "/" + "/".join(out)
