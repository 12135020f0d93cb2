"""Where the authorization server may send a code: ``https://`` addresses only (spec 5.2 step
3), never a loopback one, however its host is spelled.

A browser reads a URL's host by the WHATWG URL standard, not as ``urllib.parse`` does:
``127.1``, ``0x7f.0.0.1``, ``2130706433`` and ``127.000.000.001`` are all 127.0.0.1,
``local%68ost`` and fullwidth letters are ``localhost``, and ``https://a\\@b/`` goes to ``a``.
So the host is judged as pydantic's URL type reads it (a WHATWG parser, the one the mcp SDK
validates and compares redirect URIs with), and a URI whose host is not written the way that
parser writes it is refused outright: what was checked is then what the browser visits.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from urllib.parse import urlsplit

from pydantic import AnyUrl, TypeAdapter, ValidationError

LOOPBACK_REFUSED = (
    "paysign's OAuth sign-in only sends its result to an https:// address. Clients on your own "
    "machine that expect a localhost or loopback address must use an API key instead: create "
    "one in the paysign portal and configure it as 'Authorization: Bearer <API_KEY>'."
)
HTTPS_REQUIRED = "redirect URIs must be https:// addresses (spec 5.2 step 3)"
NOT_A_URL = "the redirect URI is not a valid URL"
NOT_CANONICAL = "write the redirect URI's host the way browsers do: {host}"
CREDENTIALS_REFUSED = (
    "a redirect URI must not carry a user name or password: a browser goes to the host after "
    "the '@', while the sign-in page would show what comes before it"
)

_URL: TypeAdapter[AnyUrl] = TypeAdapter(AnyUrl)
# Names that resolve to this machine on common systems without asking DNS (/etc/hosts).
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
# IPv6 addresses that carry an IPv4 address in their last 32 bits: IPv4-compatible,
# IPv4-mapped, SIIT-translated and NAT64. A connection to one can reach the IPv4 address.
_CARRYING_IPV4 = tuple(
    ip_network(n) for n in ("::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96")
)
_THIS_HOST = (ip_network("127.0.0.0/8"), ip_network("0.0.0.0/8"))


def _carried_ipv4(address: IPv6Address) -> IPv4Address | None:
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in network for network in _CARRYING_IPV4):
        return IPv4Address(int(address) & 0xFFFF_FFFF)
    return None


def is_loopback_host(host: str) -> bool:
    """Whether a host (as a WHATWG parser writes it) is this machine: 127.0.0.0/8, 0.0.0.0/8
    (connecting to 0.0.0.0 reaches this machine), ``::1``, ``::``, an IPv6 address carrying
    one of those, or a localhost name (trailing dots ignored, as DNS does).

    >>> [is_loopback_host(h) for h in ("127.0.0.1", "[::ffff:7f00:1]", "a.localhost.", "[::]")]
    [True, True, True, True]
    >>> [is_loopback_host(h) for h in ("8.8.8.8", "[2001:db8::1]", "localhost.example")]
    [False, False, False]
    """
    name = host.strip("[]").rstrip(".").lower()
    if name in _LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ip_address(name)
    except ValueError:
        return False
    if isinstance(address, IPv6Address):
        if address.is_loopback or address.is_unspecified:
            return True
        carried = _carried_ipv4(address)
        if carried is None:
            return False
        address = carried
    return any(address in network for network in _THIS_HOST)


def redirect_uri_problem(uri: str) -> str | None:
    """Why a redirect URI is refused, or ``None``.

    >>> redirect_uri_problem("https://claude.ai/api/mcp/auth_callback") is None
    True
    >>> redirect_uri_problem("http://localhost:3000/cb").startswith("paysign's OAuth")
    True
    >>> redirect_uri_problem("https://0x7f.1/cb").startswith("paysign's OAuth")
    True
    >>> redirect_uri_problem("http://client.example/cb")
    'redirect URIs must be https:// addresses (spec 5.2 step 3)'
    >>> redirect_uri_problem("https://010.8.8.8/cb")
    "write the redirect URI's host the way browsers do: 8.8.8.8"
    >>> redirect_uri_problem("https://claude.ai@evil.example/cb") == CREDENTIALS_REFUSED
    True
    """
    try:
        read = _URL.validate_python(uri)
        written = urlsplit(uri)
        written_host = written.hostname or ""
    except (ValidationError, ValueError):
        return NOT_A_URL
    host = read.host or ""
    # Both readings are judged: a URI one parser reads as loopback is refused as loopback.
    if is_loopback_host(host) or is_loopback_host(written_host):
        return LOOPBACK_REFUSED
    if read.scheme != "https" or written.scheme != "https" or not host or read.fragment:
        return HTTPS_REQUIRED
    if "@" in written.netloc or read.username is not None or read.password is not None:
        return CREDENTIALS_REFUSED
    if written_host != host.strip("[]"):
        return NOT_CANONICAL.format(host=host)
    return None
