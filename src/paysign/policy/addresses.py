"""IP addresses, judged one way: the spelling the source policy uses and the verdict the
connector's address guard uses.

An IPv6 address can carry an IPv4 address inside it. Two wrappers name the very IPv4 host a
socket reaches: IPv4-mapped ``::ffff:a.b.c.d`` (a dual-stack socket connects to ``a.b.c.d``)
and IPv4-compatible ``::a.b.c.d``; the policy writes both as the IPv4 address, so a rule on
``10.0.0.1`` covers them. The others (NAT64, 6to4, Teredo, SIIT) are different addresses that
a translator or a relay turns into IPv4 traffic; the guard unwraps them before judging.

    >>> [canonical_ip(ipaddress.ip_address(a)) for a in ("::ffff:a00:1", "::a00:1", "::1")]
    [IPv4Address('10.0.0.1'), IPv4Address('10.0.0.1'), IPv6Address('::1')]
    >>> embedded_ipv4(ipaddress.ip_address("2002:a00:1::1"))
    IPv4Address('10.0.0.1')
    >>> [is_public_address(a) for a in ("8.8.8.8", "64:ff9b::808:808", "64:ff9b::a00:1")]
    [True, True, False]
    >>> [is_public_address(a) for a in ("::a00:1", "2002:a00:1::1", "fec0::1", "2001:4860::1")]
    [False, False, False, True]
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv6Address, IPv6Network

IPAddress = IPv4Address | IPv6Address

_LOW_32 = 0xFFFF_FFFF
_COMPATIBLE = IPv6Network("::/96")  # RFC 4291 2.5.5.1, deprecated; "::" and "::1" excepted
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")  # SIIT, RFC 2765
_NAT64 = IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix
_NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")  # RFC 8215 local use
_GLOBAL_UNICAST = IPv6Network("2000::/3")


def embedded_ipv4(ip: IPAddress) -> IPv4Address | None:
    """The IPv4 address an IPv6 address wraps (mapped, compatible, SIIT, NAT64, 6to4, Teredo
    client), or ``None``.

    Under the local-use NAT64 prefix the IPv4 address sits where the operator's prefix length
    puts it; the /96 layout (the last 32 bits) is assumed, which only names it in messages:
    the guard refuses that prefix whatever it holds.
    """
    if isinstance(ip, IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _COMPATIBLE:
        return IPv4Address(int(ip)) if int(ip) > 1 else None
    if ip in _TRANSLATED or ip in _NAT64 or ip in _NAT64_LOCAL:
        return IPv4Address(int(ip) & _LOW_32)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def canonical_ip(ip: IPAddress) -> IPAddress:
    """The one spelling of an address: IPv4-mapped and IPv4-compatible IPv6 become IPv4."""
    if isinstance(ip, IPv6Address) and (ip.ipv4_mapped is not None or ip in _COMPATIBLE):
        return embedded_ipv4(ip) or ip
    return ip


def is_public_address(address: str | IPAddress) -> bool:
    """Whether the connector may call this address: globally routable unicast only.

    IPv4-mapped and NAT64 (``64:ff9b::/96``) addresses are judged by the IPv4 address they
    carry: that is how an ordinary IPv4 seller appears to a dual-stack socket and on an
    IPv6-only network with DNS64, so refusing them would refuse every IPv4 seller there.
    Every other wrapper — IPv4-compatible, SIIT, 6to4, Teredo, local-use NAT64 — is refused
    whatever it carries, a public address included: they are deprecated or site-local
    transition mechanisms no public seller is reached by, and where one ends up depends on a
    relay or translator the operator does not run. Of plain IPv6 only global unicast
    (``2000::/3``, not a special-purpose block) is public; site-local ``fec0::/10``, unique
    local, link-local, multicast and the reserved blocks are not.
    """
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, IPv6Address):
        if ip.ipv4_mapped is not None or ip in _NAT64:
            inner = embedded_ipv4(ip)
            assert inner is not None  # both wrappers always carry one
            return _is_public_ipv4(inner)
        if embedded_ipv4(ip) is not None:
            return False
        return ip in _GLOBAL_UNICAST and ip.is_global
    return _is_public_ipv4(ip)


def _is_public_ipv4(ip: IPv4Address) -> bool:
    # is_global leaves out private, loopback, link-local, shared (100.64/10), reserved and
    # documentation blocks; multicast is "global" to it but is never a seller.
    return ip.is_global and not ip.is_multicast
