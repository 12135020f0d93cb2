"""What an agent or a client names is shown to the holder as text, never as markup.

Seller URLs come from whoever holds the API key (a thief, a prompt-injected agent) and OAuth
client names from anyone who registers; both reach the holder's pages. Each page is parsed as a
browser would and must hold no element, attribute or script the payloads tried to add."""

from __future__ import annotations

import secrets
from collections import Counter
from html.parser import HTMLParser
from urllib.parse import quote, urlsplit

import httpx

from conftest import FrozenClock, signature_body
from paysign.bootstrap import Runtime
from paysign.services import accounts, keys
from portal.conftest import signed_in

PAYLOADS = [
    "<x-pwn>",
    '"><x-pwn onpwn=1>',
    "'><x-pwn onpwn=1>",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "javascript:alert(1)",
    "%3Cx-pwn%3E",
    "%253Cx-pwn%253E",
    "&lt;x-pwn&gt;",
    "<!--x-pwn-->",
    "<iframe src=//evil.example>",
    '" onmouseover="alert(1)',
    "' onfocus='alert(1)' autofocus='",
    "</title><x-pwn>",
    "</textarea><x-pwn>",
    "<style>*{display:none}</style>",
    "<base href=//evil.example/>",
    "<meta http-equiv=refresh content=0;url=//evil.example>",
    "<form action=//evil.example><button>",
    "<a href=javascript:alert(1)>x</a>",
    "{{7*7}}<x-pwn>",
    "${7*7}<x-pwn>",
    "\u2028<x-pwn>\u2029",
    "<x-pwn/onpwn=1>",
]
ALLOWED_SCRIPTS = {"/portal/static/portal.js"}


class _Markup(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.event_attributes: list[str] = []
        self.scripts: list[str | None] = []
        self.script_urls: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        for name, value in attrs:
            if name.startswith("on"):
                self.event_attributes.append(f"{tag} {name}")
            if name in ("href", "src", "action") and value and "javascript:" in value.lower():
                self.script_urls.append(value)
        if tag == "script":
            self.scripts.append(dict(attrs).get("src"))


# Tags a page repeats per row are fine in any number; these only as often as the page's own.
COUNTED = ("script", "style", "svg", "img", "iframe", "base", "meta", "x-pwn")


def _assert_inert(page: httpx.Response, baseline: _Markup) -> None:
    markup = _Markup(page.text)
    assert set(markup.tags) <= set(baseline.tags), (page.url, set(markup.tags) - set(baseline.tags))
    for tag in COUNTED:
        assert markup.tags[tag] == baseline.tags[tag], (page.url, tag)
    assert markup.event_attributes == baseline.event_attributes == [], page.url
    assert not markup.script_urls, (page.url, markup.script_urls)
    assert set(markup.scripts) <= ALLOWED_SCRIPTS, (page.url, markup.scripts)


def test_seller_urls_an_agent_sends_are_shown_as_text(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    issued = keys.issue_key(runtime.db, runtime.clock, email=holder.email, expires_in_days=9)
    auth = {"Authorization": f"Bearer {issued.api_key}"}

    def pay(url: str) -> httpx.Response:
        return browser.post(
            "/wallets/signatures", json=signature_body(seller_url=url), headers=auth
        )

    tag = secrets.token_hex(3)
    plain = f"https://plain-{tag}.example.net/v1/quote"
    assert pay(plain).status_code == 403  # pending: every page shows one row of each kind
    signed_in(browser, holder, clock)
    pages = ("/portal/", "/portal/approvals", "/portal/activity", "/portal/policy")
    baselines = {path: _Markup(browser.get(path).text) for path in pages}
    pending = 0
    spellings = [*PAYLOADS, *(quote(payload, safe="") for payload in PAYLOADS)]
    for i, payload in enumerate(spellings):
        url = f"https://s{i}-{tag}.example.net/v1/{payload}?q={payload}#{payload}"
        answer = pay(url)
        assert 400 <= answer.status_code < 500, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        pending += answer.status_code == 403
    assert pending >= len(PAYLOADS)  # every encoded payload is a valid path: it reaches the pages
    for path in pages:
        page = browser.get(path)
        assert page.status_code == 200, page.text
        _assert_inert(page, baselines[path])


def test_client_names_are_shown_as_text_on_the_sign_in_pages(
    browser: httpx.Client, runtime: Runtime
) -> None:
    import base64
    import hashlib

    baseline: _Markup | None = None
    shown = 0
    # Registrations are limited per address: the payloads that differ most, within the limit.
    for payload in ["An assistant", *PAYLOADS[:12]]:
        registered = browser.post(
            "/oauth/register",
            json={
                "client_name": payload,
                "redirect_uris": ["https://client.example/cb"],
                "token_endpoint_auth_method": "none",
            },
        )
        if registered.status_code != 201:
            assert registered.status_code == 400, registered.text
            continue
        verifier = secrets.token_urlsafe(48)
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        started = browser.get(
            "/oauth/authorize",
            params={
                "response_type": "code",
                "client_id": registered.json()["client_id"],
                "redirect_uri": "https://client.example/cb",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": "s",
            },
        )
        assert started.status_code == 302, started.text
        location = urlsplit(started.headers["location"])  # the configured origin, not ours
        login = browser.get(f"{location.path}?{location.query}")
        assert login.status_code == 200, login.text
        if baseline is None:
            baseline = _Markup(login.text)
        _assert_inert(login, baseline)
        shown += 1
    assert shown >= 10
