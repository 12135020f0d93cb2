"""One address classifier: IPv4 wrapped in IPv6 is unwrapped before it is judged or matched."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paysign.policy.addresses import canonical_ip, embedded_ipv4, is_public_address

PRIVATE = ["10.0.0.1", "127.0.0.1", "169.254.169.254", "192.168.1.1"]
PUBLIC = "8.8.8.8"


def wrappers(v4: str) -> dict[str, str]:
    """Every IPv6 spelling that carries ``v4``, by the name of its wrapper."""
    n = int(ipaddress.IPv4Address(v4))
    hi, lo = n >> 16, n & 0xFFFF
    return {
        "mapped dotted": f"::ffff:{v4}",
        "mapped hex": f"::ffff:{hi:x}:{lo:x}",
        "mapped long": f"0:0:0:0:0:FFFF:{v4}",
        "compatible dotted": f"::{v4}",
        "compatible hex": f"::{hi:x}:{lo:x}",
        "siit": f"::ffff:0:{v4}",
        "nat64": f"64:ff9b::{v4}",
        "nat64 hex": f"64:ff9b::{hi:x}:{lo:x}",
        "nat64 local": f"64:ff9b:1::{hi:x}:{lo:x}",
        "6to4": f"2002:{hi:x}:{lo:x}::1",
        "teredo": f"2001:0:4136:e378:8000:63bf:{hi ^ 0xFFFF:x}:{lo ^ 0xFFFF:x}",
    }


@pytest.mark.parametrize("v4", PRIVATE)
@pytest.mark.parametrize("kind", list(wrappers(PUBLIC)))
def test_every_wrapper_of_a_private_address_is_refused(v4: str, kind: str) -> None:
    address = wrappers(v4)[kind]
    assert embedded_ipv4(ipaddress.ip_address(address)) == ipaddress.IPv4Address(v4)
    assert not is_public_address(address)


@pytest.mark.parametrize(
    ("kind", "public"),
    [
        # How an ordinary IPv4 seller shows up (dual-stack sockets, DNS64): judged by 8.8.8.8.
        ("mapped dotted", True),
        ("mapped hex", True),
        ("mapped long", True),
        ("nat64", True),
        ("nat64 hex", True),
        # Deprecated or local transition wrappers: refused whatever they carry.
        ("compatible dotted", False),
        ("compatible hex", False),
        ("siit", False),
        ("nat64 local", False),
        ("6to4", False),
        ("teredo", False),
    ],
)
def test_wrappers_of_a_public_address(kind: str, public: bool) -> None:
    address = wrappers(PUBLIC)[kind]
    assert embedded_ipv4(ipaddress.ip_address(address)) == ipaddress.IPv4Address(PUBLIC)
    assert is_public_address(address) is public


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2001:4860:4860::8888", True),
        ("2606:4700::1111", True),
        ("fec0::1", False),  # site-local
        ("feff::1", False),
        ("fc00::1", False),
        ("fd12:3456::1", False),
        ("fe80::1", False),
        ("fe80::1%eth0", False),
        ("ff02::1", False),
        ("ff0e::1", False),
        ("::", False),
        ("::1", False),
        ("100::1", False),
        ("2001:db8::1", False),
        ("2001:10::1", False),
        ("0.0.0.0", False),
        ("100.64.0.1", False),
        ("224.0.0.1", False),
        ("255.255.255.255", False),
        ("240.0.0.1", False),
    ],
)
def test_plain_addresses(address: str, public: bool) -> None:
    assert is_public_address(address) is public


@pytest.mark.parametrize(
    ("address", "canonical"),
    [
        ("::ffff:10.0.0.1", "10.0.0.1"),
        ("::ffff:a00:1", "10.0.0.1"),
        ("::10.0.0.1", "10.0.0.1"),
        ("::a00:1", "10.0.0.1"),
        ("::1", "::1"),
        ("::", "::"),
        ("64:ff9b::a00:1", "64:ff9b::a00:1"),  # a translator's address, not 10.0.0.1 itself
        ("2002:a00:1::1", "2002:a00:1::1"),
        ("10.0.0.1", "10.0.0.1"),
    ],
)
def test_canonical_ip(address: str, canonical: str) -> None:
    assert str(canonical_ip(ipaddress.ip_address(address))) == canonical


@given(st.ip_addresses(v=4))
def test_a_mapped_address_is_judged_as_its_ipv4(v4: ipaddress.IPv4Address) -> None:
    mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
    assert canonical_ip(mapped) == v4
    assert is_public_address(mapped) is is_public_address(v4)
    assert is_public_address(ipaddress.IPv6Address(f"64:ff9b::{v4}")) is is_public_address(v4)


@given(st.ip_addresses(v=6))
def test_an_address_the_guard_passes_is_global_unicast_or_a_public_ipv4(
    ip: ipaddress.IPv6Address,
) -> None:
    if not is_public_address(ip):
        return
    inner = embedded_ipv4(ip)
    if inner is not None:
        assert is_public_address(inner)
        assert ip.ipv4_mapped is not None or ip in ipaddress.IPv6Network("64:ff9b::/96")
    else:
        assert ip in ipaddress.IPv6Network("2000::/3") and ip.is_global
