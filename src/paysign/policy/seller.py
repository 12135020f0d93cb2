"""Where a payment goes, as the source policy sees it: a normalised host and path.

This is the one canonical seller address: the policy matches it, the pending list and the
ledger record it, the portal previews rules with it, the connector names sellers with it.

The query string and fragment never matter. The host is lower-cased, IDNA-encoded, and loses a
default port and a trailing dot; IP addresses are written one way only (an IPv4-mapped or
IPv4-compatible IPv6 address is its IPv4 address). A host name is LDH labels (plus ``_``);
any other character is refused. The path is percent-decoded once and re-encoded one way
(``%C3%A9`` and ``é``, ``%21`` and ``!`` are the same), ``%2F`` or ``\\`` read as ``/`` (servers
that decode them route there), a segment's ``;parameters`` are dropped (``/admin;x=1`` is
``/admin`` to Tomcat, Jetty and Spring, and ``..;`` is ``..``), and dot segments and empty
segments are removed, so ``/a/../b``, ``/%62``, ``/a%2F..%2Fb`` and ``/v1/..;/b`` are all
``/b`` — a rule cannot be dodged by spelling.

What no real seller URL holds, but some server reads as another path, is refused rather than
guessed at: a control byte (``%00``), a segment ending in a space or a dot (``/admin%20``,
``/admin.``: Windows servers drop them), a doubly encoded ``.``, ``/``, ``\\``, ``;`` or ``%``
(``%252e``: servers that decode twice see a dot), and a path that is not UTF-8 once decoded
(overlong forms like ``%C0%AE`` are a dot to some decoders).

    >>> seller_location("https://API.Example.com:443/v1/../v2/quote?x=1#f")
    SellerLocation(host='api.example.com', path='/v2/quote')
    >>> seller_location("https://[::ffff:10.0.0.1]:8443/v1/..;/admin;jsessionid=1")
    SellerLocation(host='10.0.0.1:8443', path='/admin')
    >>> seller_location("https://api.example.com/admin%00")
    Traceback (most recent call last):
    ...
    ValueError: has a control character (such as %00) in its path
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import SplitResult, quote, unquote, unquote_to_bytes, urlsplit

from paysign.policy.addresses import canonical_ip

_DEFAULT_PORTS = {"http": 80, "https": 443}
# What a path segment may hold unescaped (RFC 3986 pchar); everything else is %XX-escaped.
# No ";" (matrix parameters are dropped), so a canonical segment never holds one.
_PCHAR_SAFE = "!$&'()*+,=:@"
# A last label that WHATWG URL parsers read as a number makes the host an IPv4 address.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
# LDH labels, plus "_" (some real hosts have it); at most 63 characters each, 253 in all.
_HOST_NAME = re.compile(r"(?=.{1,253}\Z)[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*")
# IDNA 2003 (Python's codec) maps these away; IDNA 2008 and browsers keep them, so the same
# spelling would name two different hosts. They are refused rather than guessed.
_IDNA_DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")
# In a path decoded once: a control byte, or an escape that a second decoding would turn into
# another character (a server that decodes twice reads "/%2561dmin" as "/admin").
_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")
_ESCAPED_TWICE = re.compile(rb"%[0-9a-f]{2}", re.IGNORECASE)
#: The longest canonical host (port included) and path the ledger records. Escaping can make a
#: path three to twelve times its spelling, so a URL within its own limit may still pass them.
MAX_HOST_LENGTH = 255
MAX_PATH_LENGTH = 2048


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
    """``ValueError`` when the URL has no http(s) scheme or no host, or spells its host or path
    a way this module refuses; the message says which part.

    Memoised: agents pay the same few sellers over and over, and the answer (an immutable
    value) depends on the string alone. Errors are not cached.
    """
    parts = _split(url)
    location = SellerLocation(_host(parts), normalise_path(parts.path))
    if len(location.host) > MAX_HOST_LENGTH:
        raise ValueError(f"has a host longer than {MAX_HOST_LENGTH} characters with its port")
    if len(location.path) > MAX_PATH_LENGTH:
        raise ValueError(
            f"has a path longer than {MAX_PATH_LENGTH} characters once percent-encoded"
        )
    return location


@lru_cache(maxsize=4096)
def seller_host(url: str) -> str:
    """The canonical host (with a port unless it is the scheme's default) of an http(s) URL.

    >>> seller_host("http://[::ffff:a00:1]:80/anything%00")
    '10.0.0.1'
    """
    return _host(_split(url))


def _split(url: str) -> SplitResult:
    try:
        return urlsplit(url)
    except ValueError:  # only a broken "[...]" host makes urlsplit fail
        raise ValueError("has an IPv6 address not written like [2001:db8::1] in its host") from None


def _host(parts: SplitResult) -> str:
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("must be an absolute http or https URL")
    if "\\" in parts.netloc:
        # Browsers read "https://a.com\@b.com/" as host a.com, Python as host b.com.
        raise ValueError("has a backslash before the path; which host is meant is ambiguous")
    host = normalise_host(parts.hostname)
    try:
        port = parts.port
    except ValueError:
        raise ValueError("has a port that is not a number from 0 to 65535") from None
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return host


def normalise_host(hostname: str) -> str:
    try:
        hostname = unquote(hostname, errors="strict").lower()
    except UnicodeDecodeError:
        raise ValueError("has a host name that is not valid UTF-8") from None
    bracketed = hostname.startswith("[") and hostname.endswith("]")
    if bracketed or _is_ipv6(hostname):
        try:
            ip = ipaddress.IPv6Address(hostname[1:-1] if bracketed else hostname)
        except ValueError:
            raise ValueError(
                "has an IPv6 address not written like [2001:db8::1] in its host"
            ) from None
        canonical = canonical_ip(ip)
        return str(canonical) if canonical.version == 4 else f"[{canonical.compressed}]"
    if not hostname.isascii():
        if _IDNA_DEVIATIONS.intersection(hostname):
            raise ValueError(
                "has a host name with ß, ς or a zero-width joiner, which IDNA versions encode "
                "differently; write the host in its xn-- form"
            )
        try:
            hostname = hostname.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError("has a host name that is not valid IDNA") from None
    # One trailing dot is the absolute form of the same name; two are no name at all.
    hostname = hostname.removesuffix(".")
    if not _HOST_NAME.fullmatch(hostname):
        bad = next((c for c in hostname if not (c.isalnum() or c in "._-")), None)
        raise ValueError(
            f"has a character no host name has ({bad!r}) in its host"
            if bad is not None
            else "has an invalid host name (labels of 1 to 63 letters, digits, '-' or '_')"
        )
    if _NUMERIC_LABEL.fullmatch(hostname.rpartition(".")[2]):
        # "127.1", "0x7f.0.0.1" and "2130706433" are all 127.0.0.1 to a browser.
        try:
            ipaddress.IPv4Address(hostname)
        except ValueError:
            raise ValueError("has an IPv4 address not written like 192.0.2.1 in its host") from None
    return hostname


def _is_ipv6(hostname: str) -> bool:
    return ":" in hostname and all(c in "0123456789abcdef:." for c in hostname)


def normalise_path(path: str) -> str:
    """Decode once, split on ``/`` (and ``\\``), drop ``;parameters``, resolve dot segments,
    re-encode one way; ``ValueError`` for the spellings the module refuses."""
    raw = unquote_to_bytes(path)
    if _CONTROL.search(raw):
        raise ValueError("has a control character (such as %00) in its path")
    if _ESCAPED_TWICE.search(raw):
        raise ValueError(
            "has a doubly percent-encoded character (such as %252e or %2561) in its path, "
            "which a server that decodes twice reads as another"
        )
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("has a path that is not UTF-8 once percent-decoded") from None
    out: list[str] = []
    for piece in raw.replace(b"\\", b"/").split(b"/"):
        segment = piece.partition(b";")[0]
        if segment in (b"", b"."):
            continue
        if segment == b"..":
            if out:
                out.pop()
            continue
        if segment.endswith((b".", b" ")):
            shown = quote(segment[-40:], safe=_PCHAR_SAFE)
            raise ValueError(
                f"has a path segment ending in a dot or a space ({shown!r}), which some "
                "servers drop"
            )
        out.append(quote(segment, safe=_PCHAR_SAFE))
    return "/" + "/".join(out)
