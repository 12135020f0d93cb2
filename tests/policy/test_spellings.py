"""No spelling of a denied seller is signed: it is either read as the denied address (and the
deny rule matches) or refused as a URL the policy cannot judge.

The policy below lets every seller through (approval ``none``) except what a deny rule names,
so an attack spelling that slipped past the rules would come out ``allowed``.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from paysign.policy.caps import Caps
from paysign.policy.decide import Approval, Grant, PolicySettings, Tier, decide
from paysign.policy.rules import parse_rule
from paysign.policy.seller import seller_location

POLICY = PolicySettings(Approval.NONE, True, True, True, Caps.defaults())
GRANTS = [
    Grant("allow", parse_rule("api.example.com/v1")),
    Grant("deny", parse_rule("api.example.com/admin")),
    Grant("deny", parse_rule("10.0.0.1")),
    Grant("deny", parse_rule("evil.example.com")),
]


def verdict(url: str) -> str:
    """``refused`` (not a URL the policy judges), else the decision's outcome."""
    try:
        where = seller_location(url)
    except ValueError:
        return "refused"
    return decide(POLICY, GRANTS, where, Tier.OPEN_ECOSYSTEM).outcome.value


def test_the_policy_lets_other_sellers_through() -> None:
    assert verdict("https://api.example.com/v1/quote") == "allowed"
    assert verdict("https://api.example.com/public") == "allowed"
    assert verdict("https://10.0.0.2/") == "allowed"


# --- each attack, as the review found it: signed before, not now ----------------------------

HOST_PUNCTUATION = "\"=|!()',;<>{}^`$&+*~"


@pytest.mark.parametrize(
    ("url", "answer"),
    [
        # an IPv6 spelling of a denied IPv4 address is that address
        ("https://[::ffff:10.0.0.1]/", "denied"),
        ("https://[::ffff:a00:1]/", "denied"),
        ("https://[::FFFF:0A00:0001]:8443/x", "denied"),
        ("https://[0:0:0:0:0:ffff:10.0.0.1]/", "denied"),
        ("https://[::10.0.0.1]/", "denied"),
        ("https://[::a00:1]/x", "denied"),
        # ;parameters: /admin to Tomcat, Jetty and Spring
        ("https://api.example.com/admin;x=1", "denied"),
        ("https://api.example.com/admin;jsessionid=1/users", "denied"),
        ("https://api.example.com/admin%3bx=1", "denied"),
        ("https://api.example.com/admin%3B", "denied"),
        # ..; is .. to Tomcat: /v1/..;/admin is /admin, not a path under the allowed /v1
        ("https://api.example.com/v1/..;/admin", "denied"),
        ("https://api.example.com/v1/..;x=1/admin", "denied"),
        ("https://api.example.com/v1/..%3b/admin", "denied"),
        ("https://api.example.com/v1/%2e%2e%3B/admin", "denied"),
        # what servers trim or truncate, no real seller URL holds: refused
        ("https://api.example.com/admin%20", "refused"),
        ("https://api.example.com/admin.", "refused"),
        ("https://api.example.com/admin%2e", "refused"),
        ("https://api.example.com/admin%00", "refused"),
        ("https://api.example.com/admin%00.json", "refused"),
        ("https://api.example.com/v1/..%00/admin", "refused"),
        # decoded twice by some servers: refused
        ("https://api.example.com/v1/%252e%252e/admin", "refused"),
        ("https://api.example.com/v1%252f..%252fadmin", "refused"),
        ("https://api.example.com/v1/%252E%252E%252Fadmin", "refused"),
        ("https://api.example.com/v1/%25252e%25252e/admin", "refused"),
        ("https://api.example.com/v1/%%32e%%32e/admin", "refused"),
        # overlong UTF-8 dots, a "." to some decoders: refused
        ("https://api.example.com/v1/%c0%ae%c0%ae/admin", "refused"),
        # characters no host name has
        *[(f"https://evil.example.com{c}/", "refused") for c in HOST_PUNCTUATION],
        *[(f"https://evil{c}example.com/", "refused") for c in HOST_PUNCTUATION],
        ("https://evil.example.com%22/", "refused"),
        ("https://evil.example.com%2c/", "refused"),
    ],
)
def test_attack_spelling(url: str, answer: str) -> None:
    assert verdict(url) == answer


# --- every spelling: generated --------------------------------------------------------------

PORT = st.sampled_from(["", ":443", ":8443", ":1"])


def _case(draw: st.DrawFn, text: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c for c in text)


def _escape(draw: st.DrawFn, text: str) -> str:
    """Percent-encode some characters, with upper- or lower-case hex."""
    out = ""
    for c in text:
        if draw(st.integers(0, 3)) == 0:
            hexed = f"%{ord(c):02X}"
            out += hexed.lower() if draw(st.booleans()) else hexed
        else:
            out += c
    return out


@st.composite
def name_host(draw: st.DrawFn, name: str) -> str:
    spelled = _escape(draw, _case(draw, name))
    if draw(st.booleans()):
        spelled = spelled.replace(".", draw(st.sampled_from([".", "%2e", "\u3002"])))
    return spelled + draw(st.sampled_from(["", "."]))


@st.composite
def ipv4_host(draw: st.DrawFn) -> str:
    """10.0.0.1, plain or in an IPv6 wrapper that names the same host."""
    spelled = draw(
        st.sampled_from(
            [
                "10.0.0.1",
                "[::ffff:10.0.0.1]",
                "[::ffff:a00:1]",
                "[::ffff:0a00:0001]",
                "[0:0:0:0:0:ffff:a00:1]",
                "[0000:0000:0000:0000:0000:ffff:10.0.0.1]",
                "[::0:ffff:10.0.0.1]",
                "[::10.0.0.1]",
                "[::a00:1]",
                "[0:0:0:0:0:0:a00:1]",
            ]
        )
    )
    return _case(draw, spelled)


DOT_DOT = st.sampled_from(["..", "%2e%2e", ".%2E", "%2E.", "..;", "..;x=1", "%2e%2e%3b", "..%3Bp"])
DOT = st.sampled_from([".", "%2e", ".;x", "%2E%3b", ""])
SEPARATOR = st.sampled_from(["/", "//", "%2f", "%2F", "\\", "%5c", "%5C"])
MATRIX = st.sampled_from(["", "", ";x=1", ";", "%3bjsessionid=1", "%3B"])
# What no real seller URL holds: each is refused wherever it lands.
REFUSED = st.sampled_from(["%00", "%20", ".", "%2e", "%252e", "%252f", "%c0%ae", "%0a", "%7f"])


@st.composite
def admin_path(draw: st.DrawFn) -> tuple[str, bool]:
    """A spelling of ``/admin[/…]`` and whether it holds a refused part."""
    segments: list[str] = []
    for _ in range(draw(st.integers(0, 2))):
        segments.append(draw(DOT))
    if draw(st.booleans()):
        segments += [draw(st.sampled_from(["v1", "x", "v1;a=b"])), draw(DOT_DOT)]
    segments.append(_escape(draw, "admin") + draw(MATRIX))
    segments += draw(st.lists(st.sampled_from(["users", "1", "a b", "caf%C3%A9"]), max_size=2))
    refused = draw(st.booleans())
    if refused:
        at = draw(st.integers(0, len(segments) - 1))
        segments[at] += draw(REFUSED)
    path = ""  # the first "/" ends the host: an escaped one would be part of the host
    for segment in segments:
        path += (draw(SEPARATOR) if path else "/") + segment
    path += draw(st.sampled_from(["", "/", "?next=/v1", "#/v1", "?a=1#f"]))
    return path, refused


@st.composite
def denied_url(draw: st.DrawFn) -> tuple[str, bool]:
    """A URL the deny list covers however it is spelled, and whether it holds a refused part."""
    scheme = _case(draw, draw(st.sampled_from(["http", "https"])))
    userinfo = draw(st.sampled_from(["", "user@", "user:pw@", "api.example.com@"]))
    target = draw(st.sampled_from(["admin", "ip", "evil"]))
    if target == "admin":
        host = draw(name_host("api.example.com"))
        path, refused = draw(admin_path())
    else:
        host = draw(ipv4_host()) if target == "ip" else draw(name_host("evil.example.com"))
        path = draw(st.sampled_from(["", "/", "/v1/quote", "/admin;x", "/a/..;/b"]))
        refused = False
    port = draw(PORT)
    if port == ":443" and scheme.lower() == "http":
        port = ":80"
    return f"{scheme}://{userinfo}{host}{port}{path}", refused


@settings(max_examples=1000)
@given(denied_url())
@example(("https://api.example.com/v1/..;/admin", False))
@example(("https://[::ffff:a00:1]/", False))
@example(("https://api.example.com/admin%20", True))
def test_no_spelling_of_a_denied_seller_is_signed(case: tuple[str, bool]) -> None:
    url, holds_refused_part = case
    answer = verdict(url)
    if holds_refused_part:
        assert answer in ("refused", "denied"), url
    else:
        # A spelling servers read as the denied address is read so: denied, not refused.
        assert answer == "denied", url
