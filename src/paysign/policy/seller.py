"""Where a payment goes, as the source policy sees it: a normalised host and path.

The query string and fragment never matter. The host is lower-cased, IDNA-encoded, and loses a
default port; the path has dot segments removed, unreserved percent-escapes decoded, and
``%2F`` or ``\\`` read as ``/`` (servers that decode them route there), so ``/a/../b``,
``/%62`` and ``/a%2F..%2Fb`` are all ``/b`` — a rule cannot be dodged by spelling.

    >>> seller_location("https://API.Example.com:443/v1/../v2/quote?x=1#f")
    SellerLocation(host='api.example.com', path='/v2/quote')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def split_host_port(host: str) -> tuple[str, str]:
    """``("api.example.com", "8443")`` from ``api.example.com:8443``; IPv6 stays bracketed."""
    if host.startswith("["):
        end = host.index("]") + 1
        return host[:end], host[end + 1 :]
    name, _, port = host.partition(":")
    return name, port


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
        return f"[{hostname}]"
    if not hostname or any(c in hostname for c in "/\\@%:?#[] "):
        raise ValueError("has an invalid host name")
    if hostname.isascii():
        return hostname
    try:
        return hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError("has a host name that is not valid IDNA") from None


def _is_ipv6(hostname: str) -> bool:
    return ":" in hostname and all(c in "0123456789abcdef:." for c in hostname)


def _decode_unreserved(segment: str) -> str:
    def replace(m: re.Match[str]) -> str:
        byte = int(m.group(1), 16)
        return chr(byte) if byte in _UNRESERVED else "%" + m.group(1).upper()

    return _UNRESERVED_ESCAPE.sub(replace, segment)


_SEPARATOR_ESCAPE = re.compile(r"%(2[fF]|5[cC])")


def normalise_path(path: str) -> str:
    path = _SEPARATOR_ESCAPE.sub("/", _decode_unreserved(path)).replace("\\", "/")
    out: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out:
                out.pop()
            continue
        out.append(segment)
    return "/" + "/".join(out)
