"""seller_location: one normal form per seller, however the URL spells it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paysign.policy.seller import (
    SellerLocation,
    normalise_path,
    seller_host,
    seller_location,
    split_host_port,
)


def where(url: str) -> str:
    return str(seller_location(url))


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # host: case, default ports, trailing dot, percent-escapes
        ("https://API.Example.COM/v1", "api.example.com/v1"),
        ("HTTPS://api.example.com/v1", "api.example.com/v1"),
        ("https://api.example.com:443/v1", "api.example.com/v1"),
        ("http://api.example.com:80/v1", "api.example.com/v1"),
        ("https://api.example.com:0443/v1", "api.example.com/v1"),
        ("https://api.example.com:8443/v1", "api.example.com:8443/v1"),
        ("http://api.example.com:443/v1", "api.example.com:443/v1"),  # not http's default
        ("https://api.example.com:80/v1", "api.example.com:80/v1"),  # not https's default
        ("https://api.example.com./v1", "api.example.com/v1"),
        ("https://api.example.com.:443/v1", "api.example.com/v1"),
        ("https://%61pi.example.com/v1", "api.example.com/v1"),
        # userinfo is not the host: the host is after the last "@"
        ("https://api.example.com@evil.com/", "evil.com/"),
        ("https://api.example.com:443@evil.com/", "evil.com/"),
        ("https://user:pw@api.example.com/x", "api.example.com/x"),
        ("https://evil.com#@api.example.com/", "evil.com/"),
        ("https://evil.com?@api.example.com/", "evil.com/"),
        # IDNA: unicode and punycode are one host; fullwidth forms fold
        ("https://bücher.example/x", "xn--bcher-kva.example/x"),
        ("https://BÜCHER.example/x", "xn--bcher-kva.example/x"),
        ("https://XN--BCHER-KVA.example/x", "xn--bcher-kva.example/x"),
        ("https://b%C3%BCcher.example/x", "xn--bcher-kva.example/x"),
        ("https://\uff45\uff56\uff49\uff4c.com/", "evil.com/"),  # fullwidth letters
        ("https://evil\u3002com/", "evil.com/"),
        ("https://evil.com\u3002/", "evil.com/"),  # ideographic trailing dot
        ("https://xn--strae-oqa.de/", "xn--strae-oqa.de/"),
        # IP addresses: one spelling each
        ("https://192.0.2.1/x", "192.0.2.1/x"),
        ("https://192.0.2.1:8443/x", "192.0.2.1:8443/x"),
        ("https://[::1]/x", "[::1]/x"),
        ("https://[::1]:8443/x", "[::1]:8443/x"),
        ("https://[0:0:0:0:0:0:0:1]/x", "[::1]/x"),
        ("https://[2001:DB8:0::1]:443/x", "[2001:db8::1]/x"),
        # IPv4-mapped and IPv4-compatible IPv6 name the IPv4 host: written as IPv4
        ("https://[::ffff:192.0.2.1]/", "192.0.2.1/"),
        ("https://[::ffff:c000:201]:8443/", "192.0.2.1:8443/"),
        ("https://[::192.0.2.1]/", "192.0.2.1/"),
        ("https://[0:0:0:0:0:FFFF:192.0.2.1]/", "192.0.2.1/"),
        ("https://[64:ff9b::192.0.2.1]/", "[64:ff9b::c000:201]/"),  # NAT64: another address
        ("https://[::]/", "[::]/"),
        # "_" is in some real host names
        ("https://my_api.example.com/", "my_api.example.com/"),
        # path: query and fragment ignored, empty path is "/"
        ("https://api.example.com", "api.example.com/"),
        ("https://api.example.com?x=1", "api.example.com/"),
        ("https://api.example.com/v1/quote?x=1&y=/admin#/admin", "api.example.com/v1/quote"),
        # trailing and doubled slashes
        ("https://api.example.com/v1/", "api.example.com/v1"),
        ("https://api.example.com//v1//quote//", "api.example.com/v1/quote"),
        # dot segments, plain and escaped
        ("https://api.example.com/a/../admin", "api.example.com/admin"),
        ("https://api.example.com/./admin/.", "api.example.com/admin"),
        ("https://api.example.com/../../admin", "api.example.com/admin"),
        ("https://api.example.com/x/%2e%2e/admin", "api.example.com/admin"),
        ("https://api.example.com/x/%2E./admin", "api.example.com/admin"),
        ("https://api.example.com/x/.%2E/admin", "api.example.com/admin"),
        ("https://api.example.com/%2e/admin", "api.example.com/admin"),
        # escaped letters, any case
        ("https://api.example.com/%61dmin", "api.example.com/admin"),
        ("https://api.example.com/%41dmin", "api.example.com/Admin"),
        ("https://api.example.com/ad%6Din", "api.example.com/admin"),
        ("https://api.example.com/ad%6din", "api.example.com/admin"),
        # escaped and backslash separators
        ("https://api.example.com/admin%2F..%2Fadmin", "api.example.com/admin"),
        ("https://api.example.com/x%2f..%2fadmin", "api.example.com/admin"),
        ("https://api.example.com/x%5C..%5Cadmin", "api.example.com/admin"),
        ("https://api.example.com/x\\..\\admin", "api.example.com/admin"),
        ("https://api.example.com/admin%2Fusers", "api.example.com/admin/users"),
        # other characters: one spelling each (decode once, re-encode)
        ("https://api.example.com/caf%C3%A9", "api.example.com/caf%C3%A9"),
        ("https://api.example.com/caf%c3%a9", "api.example.com/caf%C3%A9"),
        ("https://api.example.com/café", "api.example.com/caf%C3%A9"),
        ("https://api.example.com/a%21b", "api.example.com/a!b"),
        ("https://api.example.com/a!b", "api.example.com/a!b"),
        ("https://api.example.com/a%20b", "api.example.com/a%20b"),
        # decoded once only: %25 is a literal "%" when no escape follows it
        ("https://api.example.com/50%25off", "api.example.com/50%25off"),
        # ;parameters belong to their segment, and go (Tomcat, Jetty, Spring route without them)
        ("https://api.example.com/admin;x=1", "api.example.com/admin"),
        ("https://api.example.com/admin;x=1/users;y", "api.example.com/admin/users"),
        ("https://api.example.com/admin%3bx", "api.example.com/admin"),
        ("https://api.example.com/v1/..;/admin", "api.example.com/admin"),
        ("https://api.example.com/v1/..;x=y/admin", "api.example.com/admin"),
        ("https://api.example.com/v1/%2e%2e%3b/admin", "api.example.com/admin"),
        ("https://api.example.com/v1/.;x/admin", "api.example.com/v1/admin"),
        ("https://api.example.com/;x/admin", "api.example.com/admin"),
        # a dot or space inside a segment is kept
        ("https://api.example.com/v1.json", "api.example.com/v1.json"),
        ("https://api.example.com/.well-known/x", "api.example.com/.well-known/x"),
    ],
)
def test_normal_form(url: str, expected: str) -> None:
    assert where(url) == expected


def test_repr_and_fields() -> None:
    loc = seller_location("https://API.example.com:8443/v1/../v2?q")
    assert loc == SellerLocation("api.example.com:8443", "/v2")
    assert str(loc) == "api.example.com:8443/v2"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "api.example.com/v1",  # no scheme
        "//api.example.com/v1",
        "ftp://api.example.com/",
        "javascript:alert(1)",
        "https:api.example.com",
        "https:///api.example.com",
        "https://",
        "https://:443/",
        "https://api.example.com:99999/",
        "https://api.example.com:port/",
        # which host is meant depends on the parser: refused
        "https://evil.com\\@api.example.com/",
        "https://evil.com\\.api.example.com/",
        # host characters that are never part of a name
        "https://api%2Fexample.com/",
        "https://evil.com%40api.example.com/",
        "https://api%20example.com/",
        "https://%ff.example.com/",
        "https://[::1/",
        "https://[example.com]/",
        # IPv4 in legacy spellings a browser reads as 127.0.0.1
        "https://127.1/",
        "https://0x7f.0.0.1/",
        "https://2130706433/",
        "https://017700000001/",
        "https://127.000.000.001/",
        "https://1.2.3.4.5/",
        # hosts with characters no host name has, or empty labels
        'https://evil.com"/',
        "https://evil.com,/",
        "https://evil.com;/",
        "https://a..example.com/",
        "https://api.example.com../",
        "https://" + "a" * 64 + ".example.com/",
        # path spellings that servers read as another path: refused
        "https://api.example.com/admin%00",
        "https://api.example.com/admin%00.json",
        "https://api.example.com/admin%0a",
        "https://api.example.com/admin%20",
        "https://api.example.com/admin.",
        "https://api.example.com/admin%2e",
        "https://api.example.com/admin..",
        "https://api.example.com/admin.;x",
        "https://api.example.com/.../admin",
        "https://api.example.com/%252e%252e/admin",
        "https://api.example.com/a%252Fb",
        "https://api.example.com/a%255cb",
        "https://api.example.com/admin%253bx",
        "https://api.example.com/%25252e",
        "https://api.example.com/%%32e%%32e/admin",
        "https://api.example.com/%2500",
        "https://api.example.com/%2561dmin",  # "/admin" to a server that decodes twice
        "https://api.example.com/%2541DMIN/users",
        "https://api.example.com/%c0%ae%c0%ae/admin",
        "https://api.example.com/%ff",
        # IDNA 2003 and 2008 disagree: two different hosts, one spelling
        "https://straße.de/",
        "https://STRAẞE.de/",
        "https://ευχαριστώς.gr/",
        "https://a\u200db.example/",
    ],
)
def test_refused(url: str) -> None:
    with pytest.raises(ValueError):
        seller_location(url)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("api.example.com", ("api.example.com", "")),
        ("api.example.com:8443", ("api.example.com", "8443")),
        ("[::1]", ("[::1]", "")),
        ("[::1]:8443", ("[::1]", "8443")),
    ],
)
def test_split_host_port(host: str, expected: tuple[str, str]) -> None:
    assert split_host_port(host) == expected


@pytest.mark.parametrize("host", ["[::1", "[::1]x", "[::1]8443"])
def test_split_host_port_refuses_broken_brackets(host: str) -> None:
    with pytest.raises(ValueError):
        split_host_port(host)


PATH_CHARS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@given(PATH_CHARS)
def test_normalise_path_is_idempotent_and_canonical(raw: str) -> None:
    try:
        once = normalise_path(raw)
    except ValueError:
        return  # refused: nothing to be canonical about
    assert normalise_path(once) == once
    assert once.startswith("/")
    assert "//" not in once
    assert once == "/" or not once.endswith("/")
    segments = once.split("/")[1:]
    assert "." not in segments and ".." not in segments
    assert not any(s.endswith((".", "%20")) for s in segments)
    assert once.isascii() and "\\" not in once and "?" not in once and "#" not in once
    assert ";" not in once


@given(PATH_CHARS)
def test_query_and_fragment_never_change_the_location(raw: str) -> None:
    base = "https://api.example.com/" + raw.replace("?", "").replace("#", "")
    try:
        expected = seller_location(base)
    except ValueError:
        for suffix in ("?q=/../admin", "#/admin"):
            with pytest.raises(ValueError):
                seller_location(base + suffix)
        return
    assert seller_location(base + "?q=/../admin") == expected
    assert seller_location(base + "#/admin") == expected


@pytest.mark.parametrize(
    ("url", "part"),
    [
        ('https://evil.com"/', "host"),
        ("https://[::ffff:1.2.3]/", "host"),
        ("https://127.1/", "host"),
        ("https://api.example.com/admin%00", "path"),
        ("https://api.example.com/admin.", "path"),
        ("https://api.example.com/%252e%252e/admin", "path"),
        ("https://api.example.com/%ff", "path"),
    ],
)
def test_a_refusal_names_the_part(url: str, part: str) -> None:
    with pytest.raises(ValueError, match=part):
        seller_location(url)


def test_seller_host_is_the_locations_host() -> None:
    url = "HTTP://[::ffff:a00:1]:8080/v1/..;/admin"
    assert seller_host(url) == seller_location(url).host == "10.0.0.1:8080"
    assert seller_host("https://api.example.com/admin%00") == "api.example.com"
