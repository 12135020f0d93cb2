"""The rule preview on the policy page: the same validation as saving, the sellers and catalog
listings the rule matches (by the real matcher), examples of its edges — and nothing saved."""

from __future__ import annotations

import re
import secrets
from html import unescape

import httpx
import pytest

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.policy.rules import parse_rule
from paysign.services import accounts, policy
from paysign.services.catalog import demo_catalog, import_catalog
from paysign.services.rule_preview import examples
from paysign.store.schema import pending_sellers, refusals, signatures
from portal.conftest import csrf_of, error_of, signed_in

T0 = 1_790_000_000


def _seen(runtime: Runtime, account_id: str, *sellers: str, refused: bool = False) -> None:
    """Rows as the signing path leaves them, for sellers written ``host/path``."""
    rows = []
    for i, seller in enumerate(sellers):
        host, _, path = seller.partition("/")
        row = {
            "account_id": account_id,
            "seller_host": host,
            "seller_path": "/" + path,
            "network": "eip155:84532",
            "amount": 1,
            "sandbox": True,
            "created_at": T0 + i,
        }
        if refused:
            row |= {"reason": "allow-pending", "detail": "waiting", "rule": None}
        else:
            row |= {
                "asset": "0x" + "11" * 20,
                "pay_to": "0x" + "22" * 20,
                "nonce": secrets.token_bytes(32),
                "valid_before": T0 + 60,
                "x402_version": 2,
                "status": "signed",
            }
        rows.append(row)
    with runtime.db.write() as conn:
        conn.execute((refusals if refused else signatures).insert(), rows)


@pytest.fixture
def page(browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount) -> httpx.Client:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    _seen(runtime, holder.account_id, "api.example.com/v1/quote", "api.example.com/v10")
    _seen(runtime, holder.account_id, "a.b.example.org:8443/x", "other.test/", refused=True)
    with runtime.db.write() as conn:
        conn.execute(
            pending_sellers.insert().values(
                account_id=holder.account_id,
                host="new.example.org",
                path="/q",
                first_seen=T0,
                last_seen=T0,
                refused_count=2,
            )
        )
    import_catalog(runtime.db, runtime.clock, demo_catalog("https://sellers.example.com"))
    signed_in(browser, holder, clock)
    return browser


def _preview(browser: httpx.Client, rule: str, kind: str = "allow") -> httpx.Response:
    csrf = csrf_of(browser.get("/portal/policy"))
    return browser.post("/portal/policy/preview", data={"csrf": csrf, "kind": kind, "rule": rule})


def _items(response: httpx.Response, list_id: str) -> list[str]:
    found = re.search(rf'<ul id="{list_id}">(.*?)</ul>', response.text, re.S)
    if found is None:
        return []
    return [
        unescape(re.sub(r"<[^>]+>", "", item)) for item in re.findall(r"<li>(.*?)</li>", found[1])
    ]


def _examples(response: httpx.Response) -> dict[str, str]:
    rows = re.findall(
        r'<tr><td class="mono">([^<]+)</td><td>[^<]*</td>\s*<td class="\w+">(yes|no)</td>',
        response.text,
    )
    return {unescape(url): verdict for url, verdict in rows}


def test_a_path_rule_matches_on_segment_boundaries_and_saves_nothing(
    page: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    before = policy.get_policy(runtime.db, email=holder.email)
    shown = _preview(page, "https://API.example.com/v1/")
    assert shown.status_code == 200, shown.text
    assert 'id="preview-valid"' in shown.text and "<code>api.example.com/v1</code>" in shown.text
    assert _items(shown, "preview-sellers") == ["api.example.com/v1/quote"]  # not /v10
    assert 'id="preview-no-listings"' in shown.text
    verdicts = _examples(shown)
    assert verdicts["https://api.example.com/v1"] == "yes"
    assert verdicts["https://api.example.com/v1/more?q=1"] == "yes"
    assert verdicts["https://api.example.com/v1x"] == "no"
    assert verdicts["https://api.api.example.com/v1"] == "no"  # no subdomains
    assert verdicts["https://api.example.com:8443/v1"] == "yes"  # every port
    # The typed rule stays in the form, and the policy is untouched (no code was asked for).
    assert 'value="https://API.example.com/v1/"' in shown.text
    assert policy.get_policy(runtime.db, email=holder.email) == before


def test_a_wildcard_covers_subdomains_pending_sellers_and_says_so(page: httpx.Client) -> None:
    shown = _preview(page, "*.example.org", kind="deny")
    assert shown.status_code == 200
    assert _items(shown, "preview-sellers") == [
        "a.b.example.org:8443/x",
        "new.example.org/q — waiting for your approval",
    ]
    verdicts = _examples(shown)
    assert verdicts["https://api.example.org/"] == "yes"
    assert verdicts["https://a.b.example.org/"] == "yes"
    assert verdicts["https://example.org/"] == "no"  # not the apex


def test_catalog_listings_are_matched_when_every_call_is_covered(page: httpx.Client) -> None:
    market = _preview(page, "sellers.example.com/market")
    assert _items(market, "preview-listings") == [
        "https://sellers.example.com/market/v1/filings — company_filings (premium; paid at most "
        "its listed 0.05 USDC)",
        "https://sellers.example.com/market/v1/quote/{symbol} — market_quote (premium; paid at "
        "most its listed 0.01 USDC)",
    ]
    quote = _preview(page, "sellers.example.com/market/v1/quote")
    assert _items(quote, "preview-listings") == [
        "https://sellers.example.com/market/v1/quote/{symbol} — market_quote (premium; paid at "
        "most its listed 0.01 USDC)"
    ]
    # One symbol only is not the whole listing.
    one = _preview(page, "sellers.example.com/market/v1/quote/ACME")
    assert 'id="preview-no-listings"' in one.text


def test_an_allow_preview_names_the_deny_rule_that_still_wins(
    page: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    policy.decide_seller(
        runtime.db, runtime.clock, email=holder.email, seller="api.example.com/v1", kind="deny"
    )
    shown = _preview(page, "api.example.com")
    assert _items(shown, "preview-sellers") == [
        "api.example.com/v1/quote — still refused: deny rule api.example.com/v1 comes first",
        "api.example.com/v10",
    ]
    again = _preview(page, "api.example.com/v1", kind="deny")
    assert "It is already on the deny list." in again.text


def test_a_preview_under_a_freeze_says_nothing_is_paid(
    page: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    assert 'id="preview-frozen"' not in _preview(page, "api.example.com").text
    policy.freeze_spending(runtime.db, runtime.clock, email=holder.email, frozen=True)
    shown = _preview(page, "api.example.com")
    assert 'id="preview-frozen"' in shown.text
    assert "Spending is frozen" in shown.text


@pytest.mark.parametrize(
    "rule", ["not a host", "*.*.example.com", "example.com/x?q=1", "ftp://x.y"]
)
def test_an_invalid_rule_gets_the_message_saving_would_give(page: httpx.Client, rule: str) -> None:
    shown = _preview(page, rule)
    assert shown.status_code == 400 and 'id="preview-invalid"' in shown.text
    with pytest.raises(ValueError) as invalid:
        parse_rule(rule)
    assert unescape(error_of(shown)) == str(invalid.value)
    csrf = csrf_of(page.get("/portal/policy"))
    saved = page.post(
        "/portal/policy/rules", data={"csrf": csrf, "action": "add", "kind": "deny", "rule": rule}
    )
    assert saved.status_code == 400 and str(invalid.value) in unescape(error_of(saved))


def test_matches_are_capped(
    page: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    _seen(runtime, holder.account_id, *(f"many.example.net/p{i:02}" for i in range(45)))
    shown = _preview(page, "many.example.net")
    items = _items(shown, "preview-sellers")
    assert len(items) == 21 and items[-1] == "and 25 more"


def test_a_preview_needs_the_form_token_a_list_and_a_rule(page: httpx.Client) -> None:
    forged = page.post(
        "/portal/policy/preview", data={"csrf": "forged", "kind": "allow", "rule": "a.example"}
    )
    assert forged.status_code == 403
    csrf = csrf_of(page.get("/portal/policy"))
    for data in ({"kind": "maybe", "rule": "a.example"}, {"kind": "deny", "rule": " "}):
        refused = page.post("/portal/policy/preview", data={"csrf": csrf, **data})
        assert refused.status_code == 400 and error_of(refused) == "Choose a rule and a list."


def test_examples_follow_the_rule_on_a_port_and_on_an_address() -> None:
    on_port = {e.url: e.matches for e in examples(parse_rule("api.example.com:8443/v1"))}
    assert on_port["https://api.example.com:8443/v1"] is True
    assert on_port["https://api.example.com/v1"] is False  # the default port is another port
    address = {e.url: e.matches for e in examples(parse_rule("192.0.2.1"))}
    assert address == {
        "https://192.0.2.1/": True,
        "https://192.0.2.1/more?q=1": True,
        "https://192.0.2.1:8443/": True,
    }
