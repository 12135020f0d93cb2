"""What a client's address is counted as by the limits on sign-ins, sign-ups and client
registrations: the network one client holds, not one of its addresses.

An IPv6 host is usually given a whole /64, so every address in it would otherwise be a fresh
budget; an IPv4-mapped IPv6 address is its IPv4 address.

    >>> client_network("2001:db8::1") == client_network("2001:db8::ffff:2")
    True
    >>> client_network("::ffff:203.0.113.7"), client_network("203.0.113.7")
    ('203.0.113.7', '203.0.113.7')
    >>> client_network("2001:db8:0:1::1")
    '2001:db8:0:1::/64'
"""

from __future__ import annotations

from ipaddress import IPv6Address, IPv6Network, ip_address


def client_network(address: str) -> str:
    """The counted network of ``address`` (anything that is no IP address: itself, cut)."""
    try:
        parsed = ip_address(address)
    except ValueError:
        return address[:90]
    if isinstance(parsed, IPv6Address):
        if parsed.ipv4_mapped is None:
            return str(IPv6Network((int(parsed) >> 64 << 64, 64)))
        parsed = parsed.ipv4_mapped
    return str(parsed)


__all__ = ["client_network"]
