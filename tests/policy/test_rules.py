"""Rules ``host[/path]``: parsing, matching, and the candidate hosts the database looks up."""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, example, given, reject, settings
from hypothesis import strategies as st

from paysign.policy.rules import MAX_RULE_LENGTH, candidate_hosts, parse_rule
from paysign.policy.seller import SellerLocation, seller_location

# --- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "host", "path"),
    [
        ("api.example.com", "api.example.com", "/"),
        ("  api.example.com  ", "api.example.com", "/"),
        ("API.Example.COM", "api.example.com", "/"),
        ("api.example.com.", "api.example.com", "/"),
        ("api.example.com/", "api.example.com", "/"),
        ("api.example.com/v1", "api.example.com", "/v1"),
        ("api.example.com/v1/", "api.example.com", "/v1"),
        ("api.example.com//v1//quote/", "api.example.com", "/v1/quote"),
        ("api.example.com/v1/../v2", "api.example.com", "/v2"),
        ("api.example.com/%61dmin", "api.example.com", "/admin"),
        ("api.example.com/café", "api.example.com", "/caf%C3%A9"),
        ("*.example.com", "*.example.com", "/"),
        ("*.Example.org/v1/", "*.example.org", "/v1"),
        ("*.co.uk", "*.co.uk", "/"),
        # ports: kept unless they are a default port
        ("api.example.com:8443", "api.example.com:8443", "/"),
        ("api.example.com:08443/x", "api.example.com:8443", "/x"),
        ("*.example.com:8443/v1", "*.example.com:8443", "/v1"),
        ("api.example.com:443", "api.example.com", "/"),
        ("api.example.com:80", "api.example.com", "/"),
        ("api.example.com:0443", "api.example.com", "/"),
        ("api.example.com:", "api.example.com", "/"),
        # a scheme is tolerated and ignored
        ("https://api.example.com/v1", "api.example.com", "/v1"),
        ("HTTP://api.example.com/v1", "api.example.com", "/v1"),
        ("https://api.example.com:443/v1", "api.example.com", "/v1"),
        ("http://api.example.com:80/v1", "api.example.com", "/v1"),
        ("http://api.example.com:443/v1", "api.example.com", "/v1"),
        # IDNA
        ("bücher.example/x", "xn--bcher-kva.example", "/x"),
        ("XN--BCHER-KVA.example/x", "xn--bcher-kva.example", "/x"),
        ("*.bücher.example", "*.xn--bcher-kva.example", "/"),
        # addresses
        ("localhost", "localhost", "/"),
        ("192.0.2.1/x", "192.0.2.1", "/x"),
        ("[::1]", "[::1]", "/"),
        ("[0:0::1]:8443/x", "[::1]:8443", "/x"),
        ("[2001:DB8::1]:443", "[2001:db8::1]", "/"),
        ("[::ffff:10.0.0.1]", "10.0.0.1", "/"),
        ("[::10.0.0.1]:8443", "10.0.0.1:8443", "/"),
        ("api.example.com/admin;x=1/", "api.example.com", "/admin"),
        ("api.example.com/v1/..;/admin", "api.example.com", "/admin"),
        ("my_api.example.com", "my_api.example.com", "/"),
    ],
)
def test_parse(text: str, host: str, path: str) -> None:
    rule = parse_rule(text)
    assert (rule.host, rule.path) == (host, path)
    assert parse_rule(str(rule)) == rule


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "/v1",
        "example",  # not a full name
        "*.com",  # a wildcard over a whole TLD
        "*",
        "*.*.example.com",
        "a*.example.com",
        "api.*.example.com",
        "*example.com",
        "user@api.example.com",
        "api.example.com?x=1",
        "api.example.com/v1#f",
        "ftp://api.example.com",
        "api.example.com:0",
        "api.example.com:65536",
        "api.example.com:https",
        "api.example.com:-1",
        "api.example.com:\uff18\uff10\uff18\uff10",  # full-width digits: no URL's port
        "api.example.com:\u00b2",
        "api.example.com:80:80",
        "api.exa mple.com",
        "api.exa\tmple.com",
        "api.example.com\\admin",
        "[::1",
        "[::1]x",
        "*.[::1]",
        "*.192.0.2.1",
        "127.1",
        "straße.de",
        "a" * (MAX_RULE_LENGTH + 1),
        "evil.com,",
        'evil"com.example',
        "api.example.com/admin%00",
        "api.example.com/admin.",
        "api.example.com/admin%20",
        "api.example.com/%252e%252e",
        "*.[::ffff:10.0.0.1]",
    ],
)
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rule(text)


@pytest.mark.parametrize(
    "text", ["https://Shop.Example.com/Admin/*", "shop.example.com/*", "*.example.com/api/*"]
)
def test_a_glob_at_the_end_of_a_path_is_refused_saying_a_path_covers_what_is_under_it(
    text: str,
) -> None:
    """Saved as written, '/admin/*' was a literal '*' matching no path: as a deny rule it
    denied nothing under /admin."""
    with pytest.raises(ValueError, match="already covers everything under it"):
        parse_rule(text)


@pytest.mark.parametrize("value", [None, 1, ["api.example.com"], {"host": "x"}])
def test_parse_refuses_non_strings(value: object) -> None:
    with pytest.raises(ValueError):
        parse_rule(value)  # type: ignore[arg-type]


def test_str_omits_the_root_path() -> None:
    assert str(parse_rule("api.example.com/")) == "api.example.com"
    assert str(parse_rule("api.example.com/v1/")) == "api.example.com/v1"
    assert str(parse_rule("*.example.com:8443/v1")) == "*.example.com:8443/v1"


# --- matching -------------------------------------------------------------------------------

MATCHES = [
    # exact host, any case, any port when the rule names none
    ("api.example.com", "https://api.example.com/", True),
    ("api.example.com", "https://api.example.com/anything/at/all?q=1", True),
    ("api.example.com", "https://API.EXAMPLE.COM/x", True),
    ("API.example.com", "https://api.example.com/x", True),
    ("api.example.com", "http://api.example.com/x", True),
    ("api.example.com", "https://api.example.com:8443/x", True),
    ("api.example.com", "http://api.example.com:443/x", True),
    ("api.example.com", "https://api.example.com./x", True),
    ("api.example.com.", "https://api.example.com/x", True),
    ("api.example.com", "https://example.com/x", False),
    ("api.example.com", "https://www.api.example.com/x", False),
    ("api.example.com", "https://api.example.com.evil.com/x", False),
    ("api.example.com", "https://api.example.co/x", False),
    ("api.example.com", "https://api.example.com@evil.com/", False),
    ("evil.com", "https://api.example.com@evil.com/", True),
    ("evil.com", "https://evil.com\u3002/", True),
    # a rule with a port covers that port only
    ("api.example.com:8443", "https://api.example.com:8443/x", True),
    ("api.example.com:8443", "http://api.example.com:8443/x", True),
    ("api.example.com:8443", "https://api.example.com/x", False),
    ("api.example.com:8443", "https://api.example.com:9443/x", False),
    ("api.example.com:8443", "https://api.example.com:844/x", False),
    # default ports are no port
    ("api.example.com:443", "https://api.example.com/x", True),
    ("api.example.com:443", "https://api.example.com:443/x", True),
    ("api.example.com:80", "http://api.example.com/x", True),
    ("https://api.example.com:443", "https://api.example.com/x", True),
    # wildcard: every subdomain at any depth, never the apex or a look-alike
    ("*.example.com", "https://api.example.com/x", True),
    ("*.example.com", "https://a.b.c.example.com/x", True),
    ("*.example.com", "https://API.Example.com:8443/x", True),
    ("*.example.com", "https://example.com/x", False),
    ("*.example.com", "https://evil-example.com/x", False),
    ("*.example.com", "https://evilexample.com/x", False),
    ("*.example.com", "https://example.com.evil.com/x", False),
    ("*.example.com", "https://api.example.co/x", False),
    ("*.example.com:8443", "https://api.example.com:8443/x", True),
    ("*.example.com:8443", "https://api.example.com/x", False),
    ("*.example.com/v1", "https://a.b.example.com/v1/quote", True),
    ("*.example.com/v1", "https://a.b.example.com/v2/quote", False),
    # IDNA: unicode and punycode are one rule
    ("bücher.example", "https://xn--bcher-kva.example/x", True),
    ("xn--bcher-kva.example", "https://bücher.example/x", True),
    ("xn--bcher-kva.example", "https://BÜCHER.example/x", True),
    ("*.bücher.example", "https://shop.xn--bcher-kva.example/x", True),
    ("bucher.example", "https://bücher.example/x", False),
    # path prefix on segment boundaries
    ("api.example.com/v1", "https://api.example.com/v1", True),
    ("api.example.com/v1", "https://api.example.com/v1/", True),
    ("api.example.com/v1", "https://api.example.com/v1/quote", True),
    ("api.example.com/v1", "https://api.example.com/v1?x=1", True),
    ("api.example.com/v1", "https://api.example.com/v10", False),
    ("api.example.com/v1", "https://api.example.com/v1.json", False),
    ("api.example.com/v1", "https://api.example.com/", False),
    ("api.example.com/v1", "https://api.example.com/V1", False),
    ("api.example.com/v1", "https://api.example.com/x/v1", False),
    ("api.example.com/v1/", "https://api.example.com/v1", True),
    ("api.example.com/v1/quote", "https://api.example.com/v1", False),
    ("api.example.com/v1", "https://api.example.com/v1?/../v2", True),
    ("api.example.com/v2", "https://api.example.com/v1?/../v2", False),
    ("api.example.com/v2", "https://api.example.com/v1#/../v2", False),
    # spellings that try to dodge a rule on /admin
    ("api.example.com/admin", "https://api.example.com/%61dmin", True),
    ("api.example.com/admin", "https://api.example.com/%61DMIN", False),  # other path
    ("api.example.com/admin", "https://api.example.com/ad%6Din/users", True),
    ("api.example.com/admin", "https://api.example.com/ad%6din/users", True),
    ("api.example.com/admin", "https://api.example.com/admin%2F..%2Fadmin", True),
    ("api.example.com/admin", "https://api.example.com/x%2F..%2Fadmin", True),
    ("api.example.com/admin", "https://api.example.com/x/%2e%2e/admin", True),
    ("api.example.com/admin", "https://api.example.com/x/%2E%2E/admin", True),
    ("api.example.com/admin", "https://api.example.com/x/.%2e/admin", True),
    ("api.example.com/admin", "https://api.example.com/./admin", True),
    ("api.example.com/admin", "https://api.example.com/../admin", True),
    ("api.example.com/admin", "https://api.example.com//admin", True),
    ("api.example.com/admin", "https://api.example.com/admin//users", True),
    ("api.example.com/admin", "https://api.example.com/x\\..\\admin", True),
    ("api.example.com/admin", "https://api.example.com/x%5c..%5cadmin", True),
    ("api.example.com/admin", "https://api.example.com/admin%2Fusers", True),
    ("api.example.com/admin", "https://api.example.com/admin;x=1", True),
    ("api.example.com/admin", "https://api.example.com/v1/..;/admin", True),
    ("api.example.com/admin", "https://api.example.com/admin%3Bx/users", True),
    ("api.example.com/v1", "https://api.example.com/v1/..;/admin", False),
    ("10.0.0.1", "https://[::ffff:10.0.0.1]/x", True),
    ("10.0.0.1", "https://[::ffff:a00:1]:8443/x", True),
    ("10.0.0.1", "https://[::10.0.0.1]/x", True),
    ("[::ffff:10.0.0.1]", "https://10.0.0.1/x", True),
    ("api.example.com/admin", "https://api.example.com/admin/../public", False),
    ("api.example.com/admin", "https://api.example.com/administrator", False),
    ("api.example.com/a!b", "https://api.example.com/a%21b", True),
    ("api.example.com/a%21b", "https://api.example.com/a!b", True),
    ("api.example.com/café", "https://api.example.com/caf%C3%A9/menu", True),
    ("api.example.com/caf%c3%a9", "https://api.example.com/café", True),
    ("api.example.com/a b", "https://api.example.com/a%20b", True),
    ("api.example.com/a%20b", "https://api.example.com/a%20b", True),
    # IPv6, however it is written
    ("[::1]", "https://[::1]/x", True),
    ("[::1]", "https://[0:0:0:0:0:0:0:1]:8443/x", True),
    ("[0::1]", "https://[::1]/x", True),
    ("[::1]:8443", "https://[::1]:8443/x", True),
    ("[::1]:8443", "https://[::1]/x", False),
    ("[2001:db8::1]", "https://[2001:DB8:0:0::1]/x", True),
    ("[::1]", "https://[::2]/x", False),
    ("192.0.2.1", "https://192.0.2.1:8443/x", True),
    ("192.0.2.1", "https://192.0.2.10/x", False),
]


@pytest.mark.parametrize(("rule", "url", "expected"), MATCHES)
def test_matches(rule: str, url: str, expected: bool) -> None:
    parsed = parse_rule(rule)
    location = seller_location(url)
    assert parsed.matches(location) is expected
    if expected:
        assert parsed.host in candidate_hosts(location)


# --- candidate hosts ------------------------------------------------------------------------


def test_candidate_hosts_examples() -> None:
    assert candidate_hosts(seller_location("https://a.b.example.com/x")) == [
        "a.b.example.com",
        "*.b.example.com",
        "*.example.com",
        "*.com",
    ]
    assert candidate_hosts(seller_location("https://example.com:8443/x")) == [
        "example.com",
        "example.com:8443",
        "*.com",
        "*.com:8443",
    ]
    assert candidate_hosts(seller_location("https://[::1]:8443/")) == ["[::1]", "[::1]:8443"]
    assert candidate_hosts(seller_location("https://localhost/")) == ["localhost"]


LABEL = st.text(alphabet=string.ascii_lowercase + string.digits + "-", min_size=1, max_size=6)
NAME = st.lists(
    st.sampled_from(["a", "b", "example", "com", "x-y", "1"]) | LABEL, min_size=1, max_size=5
)
PORT = st.sampled_from(["", "80", "443", "8443", "9000"])
SEGMENT = st.sampled_from(["v1", "v10", "admin", "a b", "café", "x", "%41", "!"]) | LABEL


def _host(labels: list[str], port: str) -> str:
    return ".".join(labels) + (f":{port}" if port else "")


@st.composite
def rule_and_location(draw: st.DrawFn) -> tuple[str, str]:
    """A rule text and a URL drawn from overlapping names, so matches are frequent."""
    labels = draw(NAME)
    sub = draw(st.lists(st.sampled_from(["a", "b", "www", "api"]), max_size=3))
    rule_labels = labels if draw(st.booleans()) else labels[draw(st.integers(0, len(labels) - 1)) :]
    wildcard = draw(st.booleans())
    rule_host = ("*." if wildcard else "") + _host(rule_labels, draw(PORT))
    rule_path = "/".join(draw(st.lists(SEGMENT, max_size=3)))
    scheme = draw(st.sampled_from(["http", "https"]))
    url_path = "/".join(draw(st.lists(SEGMENT, max_size=4)))
    url = f"{scheme}://{_host(sub + labels, draw(PORT))}/{url_path}"
    return f"{rule_host}/{rule_path}", url


@settings(max_examples=500)
@given(rule_and_location())
@example(("*.example.com", "https://a.b.example.com:8443/x"))
@example(("example.com:8443", "https://example.com:8443/"))
@example(("*.b.example.com:443/v1", "http://a.b.example.com:443/v1/x"))
def test_every_matching_rule_is_a_candidate(case: tuple[str, str]) -> None:
    """The database only loads rules whose host is a candidate: none that matches may be missed."""
    text, url = case
    try:
        rule = parse_rule(text)
        location = seller_location(url)
    except ValueError:
        reject()
    if rule.matches(location):
        assert rule.host in candidate_hosts(location)


@given(rule_and_location())
def test_rules_survive_their_own_rendering(case: tuple[str, str]) -> None:
    """get-policy prints ``str(rule)``; set-policy must read back the very same rule."""
    try:
        rule = parse_rule(case[0])
    except ValueError:
        reject()
    assert parse_rule(str(rule)) == rule


# --- a deny prefix cannot be dodged by spelling ---------------------------------------------


def _plain_segment(text: str) -> bool:
    """Neither a dot segment (``;parameters`` aside) nor a refused one (a lone ``*`` ends no
    rule); a rule is stripped."""
    name = text.partition(";")[0]
    plain = name not in (".", "..") and not name.endswith((".", " ")) and text != "*"
    return plain and text == text.strip()


SEGMENT_TEXT = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="/\\?#%"
    ),
    min_size=1,
    max_size=8,
).filter(_plain_segment)


@st.composite
def respelled(draw: st.DrawFn, segments: list[str]) -> str:
    """The same path with escapes (any case), ``./``, ``x/../`` and doubled slashes thrown in."""
    out = []
    for segment in segments:
        for _ in range(draw(st.integers(0, 2))):
            out.append(draw(st.sampled_from([".", "%2e", "%2E", ""])))
        if draw(st.booleans()):
            out += [
                draw(st.sampled_from(["x", "junk", "v1"])),
                draw(st.sampled_from(["..", "%2e%2e", ".%2E"])),
            ]
        spelled = ""
        for ch in segment:
            if draw(st.booleans()):
                escape = "".join(f"%{b:02X}" for b in ch.encode())
                spelled += escape.lower() if draw(st.booleans()) else escape
            else:
                spelled += ch
        out.append(spelled)
    separator = draw(st.sampled_from(["/", "//", "%2F", "%2f", "\\", "%5C"]))
    return separator.join(out)


@given(
    prefix=st.lists(SEGMENT_TEXT, min_size=1, max_size=3),
    rest=st.lists(SEGMENT_TEXT, max_size=3),
    data=st.data(),
)
def test_deny_prefix_matches_every_spelling(
    prefix: list[str], rest: list[str], data: st.DataObject
) -> None:
    rule = parse_rule("api.example.com/" + "/".join(prefix))
    path = data.draw(respelled(prefix + rest))
    query = data.draw(st.sampled_from(["", "?a=/../x", "#/../x", "?q#f"]))
    location = seller_location(f"https://API.example.com:443/{path}{query}")
    assert rule.matches(location), (str(rule), path, str(location))
    assert rule.host in candidate_hosts(location)


@given(prefix=st.lists(SEGMENT_TEXT, min_size=1, max_size=3), extra=st.text(min_size=1, max_size=3))
def test_prefix_stops_at_segment_boundaries(prefix: list[str], extra: str) -> None:
    assume("/" not in extra and "\\" not in extra and "?" not in extra and "#" not in extra)
    assume("%" not in extra)
    rule = parse_rule("api.example.com/" + "/".join(prefix))
    longer = "/".join(prefix) + extra  # the last segment grows: another segment, not a child
    try:
        location = seller_location(f"https://api.example.com/{longer}")
    except ValueError:
        reject()  # e.g. it grew a trailing dot or a control character
    assume(location.path != rule.path)
    assert not rule.matches(location)


def test_location_built_from_stored_columns_matches_like_a_parsed_one() -> None:
    """resolve_pending rebuilds locations from stored host and path."""
    stored = seller_location("https://New.Example.net/v1/Quote?x=1")
    rebuilt = SellerLocation(stored.host, stored.path)
    assert parse_rule("new.example.net/v1").matches(rebuilt)
    assert not parse_rule("new.example.net/v1/quote").matches(rebuilt)
