"""A loopback redirect URI is refused however its host is spelled: every way a browser reads
as 127.0.0.0/8, 0.0.0.0, ::1, ::, an IPv6 address carrying one of those, or a localhost name.
Any other IP address is accepted only in the one spelling browsers write it in.

The spellings are generated (hypothesis) from the WHATWG URL host parser's rules, and Node's
``URL`` (a browser-grade WHATWG implementation nobody here wrote) confirms they mean what the
generator says."""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paysign.services.oauth_redirects import LOOPBACK_REFUSED, redirect_uri_problem

from .conftest import Service, register

REPORTED = [
    "https://localhost./cb",
    "https://0.0.0.0/cb",
    "https://[::ffff:127.0.0.1]/cb",
    "https://127.1/cb",
    "https://2130706433/cb",
    "http://[::1]",
    "https://LOCALHOST/",
    "https://foo.localhost/",
    "https://[0:0:0:0:0:0:0:1]/",
    "https://0x7f.0.0.1/",
    "https://127.000.000.001/",
    "https://127.0.0.1\\@client.example/cb",
    "https://local%68ost/cb",
    "https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/cb",  # fullwidth
    "https://[::127.0.0.1]/cb",
    "https://[::]/cb",
    "https://[64:ff9b::7f00:1]/cb",
    "https://[2002:7f00:1::]/cb",
    "https://localhost.localdomain/cb",
]


def means_loopback(host: str) -> bool:
    """What the test holds loopback, for a host as a WHATWG parser writes it."""
    name = host.strip("[]").rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    address = ipaddress.ip_address(name)
    if isinstance(address, ipaddress.IPv6Address):
        if address.sixtofour is not None:
            address = address.sixtofour
        elif int(address) in (0, 1):
            return True
        elif int(address) >> 32 in (0, 0xFFFF, 0xFFFF_0000, 0x64FF9B << 64):
            address = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        else:
            return False
    return address.packed[0] in (0, 127)


# ---- spellings, after the WHATWG URL standard's host parser ----

_FULLWIDTH = {str(d): chr(0xFF10 + d) for d in range(10)} | {".": "\u3002", "x": "\uff58"}


@st.composite
def ipv4_number(draw: st.DrawFn, value: int) -> str:
    """One part of an IPv4 host: decimal, octal (a leading 0) or hex (0x), zero-padded."""
    style = draw(st.sampled_from(["dec", "oct", "hex"]))
    if style == "dec" or (style == "oct" and value == 0 and draw(st.booleans())):
        return str(value)
    pad = "0" * draw(st.integers(0, 3))
    if style == "oct":
        return "0" + pad + format(value, "o")
    digits = format(value, "x") if value or draw(st.booleans()) else ""  # "0x" alone is 0
    digits = "".join(c.upper() if draw(st.booleans()) else c for c in digits)
    return draw(st.sampled_from(["0x", "0X"])) + pad + digits


@st.composite
def ipv4_spelling(draw: st.DrawFn, address: ipaddress.IPv4Address) -> str:
    """Any way of writing the address that a browser reads as it: 1 to 4 parts (the last
    covering the remaining bytes), each part in any base, a trailing dot, percent-encoded or
    fullwidth characters."""
    value = int(address)
    parts = draw(st.integers(1, 4))
    packed = value.to_bytes(4, "big")
    numbers = [*packed[: parts - 1], int.from_bytes(packed[parts - 1 :], "big")]
    host = ".".join(draw(ipv4_number(n)) for n in numbers)
    if draw(st.booleans()):
        host += "."
    return draw(_disguised(host))


@st.composite
def _disguised(draw: st.DrawFn, host: str) -> str:
    """Characters a browser maps back before reading the host: %-escapes, fullwidth forms."""
    out = []
    for c in host:
        how = draw(st.sampled_from(["plain"] * 6 + ["percent", "fullwidth"]))
        if how == "percent":
            out.append(f"%{ord(c):02X}" if draw(st.booleans()) else f"%{ord(c):02x}")
        elif how == "fullwidth" and c.lower() in _FULLWIDTH:
            out.append(_FULLWIDTH[c.lower()])
        elif how == "fullwidth" and "a" <= c.lower() <= "z":
            out.append(chr(0xFF41 + ord(c.lower()) - ord("a")))
        else:
            out.append(c)
    return "".join(out)


@st.composite
def ipv6_spelling(draw: st.DrawFn, address: ipaddress.IPv6Address) -> str:
    """Eight groups in any case with any zero-padding, optionally one run of zero groups
    written ``::``, optionally the last 32 bits as dotted decimal."""
    groups = [
        format(int.from_bytes(address.packed[i : i + 2], "big"), "x") for i in range(0, 16, 2)
    ]
    dotted = draw(st.booleans())
    tail: list[str] = []
    if dotted:
        tail = [str(ipaddress.IPv4Address(address.packed[12:]))]
        groups = groups[:6]
    groups = [
        "0" * draw(st.integers(0, 4 - len(g)))
        + "".join(c.upper() if draw(st.booleans()) else c for c in g)
        for g in groups
    ]
    zero_runs = [
        (i, j)
        for i in range(len(groups))
        for j in range(i + 1, len(groups) + 1)
        if all(int(g, 16) == 0 for g in groups[i:j])
    ]
    if zero_runs and draw(st.booleans()):
        i, j = draw(st.sampled_from(zero_runs))
        head, rest = ":".join(groups[:i]), ":".join(groups[j:] + tail)
        return f"[{head}::{rest}]"
    return "[" + ":".join(groups + tail) + "]"


_LOOPBACK_V4 = st.one_of(
    st.integers(0x7F000000, 0x7FFFFFFF),  # 127.0.0.0/8
    st.integers(0, 0x00FFFFFF),  # 0.0.0.0/8 ("this host")
).map(ipaddress.IPv4Address)


@st.composite
def loopback_v6(draw: st.DrawFn) -> ipaddress.IPv6Address:
    v4 = int(draw(_LOOPBACK_V4))
    return ipaddress.IPv6Address(
        draw(
            st.sampled_from(
                [
                    1,  # ::1
                    0,  # ::
                    0xFFFF_0000_0000 | v4,  # ::ffff:a.b.c.d (IPv4-mapped)
                    v4,  # ::a.b.c.d (IPv4-compatible)
                    0xFFFF_0000_0000_0000 | v4,  # ::ffff:0:a.b.c.d (SIIT)
                    (0x64FF9B << 96) | v4,  # 64:ff9b::a.b.c.d (NAT64)
                    (0x2002 << 112) | (v4 << 80),  # 2002:aabb:ccdd:: (6to4)
                ]
            )
        )
    )


@st.composite
def localhost_spelling(draw: st.DrawFn) -> str:
    labels = draw(st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), max_size=3))
    name = ".".join([*labels, "localhost"])
    name = "".join(c.upper() if draw(st.booleans()) else c for c in name)
    if draw(st.booleans()):
        name += "."
    return draw(_disguised(name))


loopback_hosts = st.one_of(
    _LOOPBACK_V4.flatmap(ipv4_spelling),
    loopback_v6().flatmap(ipv6_spelling),
    localhost_spelling(),
)


@st.composite
def uri(draw: st.DrawFn, host: str) -> str:
    scheme = draw(st.sampled_from(["https", "http", "HTTPS", "Https"]))
    userinfo = draw(st.sampled_from(["", "user@", "user:pw@"]))
    port = draw(st.sampled_from(["", ":443", ":8080", ":1"]))
    path = draw(st.sampled_from(["", "/", "/cb", "/oauth/callback?x=1"]))
    return f"{scheme}://{userinfo}{host}{port}{path}"


# ---- the properties ----


@settings(max_examples=600, deadline=None)
@given(loopback_hosts.flatmap(uri))
def test_every_loopback_spelling_is_refused_as_loopback(redirect: str) -> None:
    assert redirect_uri_problem(redirect) == LOOPBACK_REFUSED


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, 2**32 - 1)
    .map(ipaddress.IPv4Address)
    .filter(lambda a: a.is_global)
    .flatmap(lambda a: st.tuples(st.just(a), ipv4_spelling(a)))
)
def test_other_addresses_count_only_in_their_canonical_spelling(
    found: tuple[ipaddress.IPv4Address, str],
) -> None:
    address, spelling = found
    problem = redirect_uri_problem(f"https://{spelling}/cb")
    if spelling == str(address):
        assert problem is None
    else:
        assert problem is not None  # refused, never judged as some other address


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**128 - 1)
    .map(ipaddress.IPv6Address)
    .filter(lambda a: a.is_global and not means_loopback(f"[{a.compressed}]"))
    .flatmap(lambda a: st.tuples(st.just(a), ipv6_spelling(a)))
)
def test_ipv6_addresses_count_only_in_their_canonical_spelling(
    found: tuple[ipaddress.IPv6Address, str],
) -> None:
    address, spelling = found
    problem = redirect_uri_problem(f"https://{spelling}/cb")
    # Hosts are case-insensitive: only the case of hex digits may differ.
    assert (problem is None) == (spelling.lower() == f"[{address.compressed}]")


@pytest.mark.parametrize("redirect", REPORTED)
def test_reported_spellings_are_refused(redirect: str) -> None:
    assert redirect_uri_problem(redirect) == LOOPBACK_REFUSED


def test_ordinary_redirects_still_pass() -> None:
    for ok in (
        "https://claude.ai/api/mcp/auth_callback",
        "https://client.example:8443/cb?x=1",
        "https://203.0.113.9/cb",
        "https://[2001:db8::1]/cb",
        "https://xn--bcher-kva.example/cb",
    ):
        assert redirect_uri_problem(ok) is None, ok


# ---- the generator against a browser-grade WHATWG parser ----

_NODE = shutil.which("node")
_READ_HOSTS = (
    "const out = JSON.parse(require('fs').readFileSync(0, 'utf8')).map(u => {"
    " try { return new URL(u).hostname } catch (e) { return null } });"
    " process.stdout.write(JSON.stringify(out));"
)


@settings(max_examples=15, deadline=None)
@given(st.lists(loopback_hosts.flatmap(uri), min_size=40, max_size=40))
def test_node_reads_every_generated_spelling_as_loopback(redirects: list[str]) -> None:
    if _NODE is None:
        pytest.fail("node is needed to check the spellings (npm install puts it in place)")
    ran = subprocess.run(
        [_NODE, "-e", _READ_HOSTS],
        input=json.dumps(redirects),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    for redirect, host in zip(redirects, json.loads(ran.stdout), strict=True):
        assert host is not None and means_loopback(host), (redirect, host)


def test_registration_refuses_the_reported_spellings(service: Service) -> None:
    for redirect in REPORTED[:15]:  # within one address's registration budget
        r = register(service, redirect_uris=[redirect])
        assert r.status_code == 400, (redirect, r.text)
        assert r.json()["error"] == "invalid_redirect_uri"
        assert "API key" in r.json()["error_description"]
    assert httpx.get(f"{service.auth_url}/.well-known/oauth-authorization-server").is_success
