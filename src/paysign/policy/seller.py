"""Where a payment goes, as the source policy sees it: a normalised host and path.

The query string and fragment never matter. The host is lower-cased, IDNA-encoded, and loses a
default port; the path has dot segments removed and unreserved percent-escapes decoded, so
``/a/../b`` and ``/%62`` are both ``/b`` — a rule cannot be dodged by spelling.

    >>> seller_location("https://API.Example.com:443/v1/../v2/quote?x=1#f")
    SellerLocation(host='api.example.com', path='/v2/quote')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


@dataclass(frozen=True, slots=True)
class SellerLocation:
    host: str
    path: str

    def __str__(self) -> str:
        return f"{self.host}{self.path}"


def seller_location(url: str) -> SellerLocation:
    """``ValueError`` when the URL has no http(s) scheme or no host."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("must be an absolute http or https URL")
    host = _normalise_host(parts.hostname)
    port = parts.port  # raises ValueError for a non-numeric or out-of-range port
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return SellerLocation(host, _normalise_path(parts.path))


def _normalise_host(hostname: str) -> str:
    hostname = hostname.rstrip(".").lower()
    if hostname.isascii():
        return hostname
    try:
        return hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError("has a host name that is not valid IDNA") from None


def _decode_unreserved(segment: str) -> str:
    def replace(m: re.Match[str]) -> str:
        byte = int(m.group(1), 16)
        return chr(byte) if byte in _UNRESERVED else "%" + m.group(1).upper()

    return _UNRESERVED_ESCAPE.sub(replace, segment)


def _normalise_path(path: str) -> str:
    out: list[str] = []
    for segment in _decode_unreserved(path).split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out:
                out.pop()
            continue
        out.append(segment)
    return "/" + "/".join(out)
