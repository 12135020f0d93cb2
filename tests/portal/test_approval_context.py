"""Approvals with their context: each pending seller with its price, payee, network, catalog
listing and tier, and how often it was refused; approved or denied by its exact path, a path
prefix or its whole host, the chosen rule settling every waiting seller it covers."""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from conftest import PAY_TO, FrozenClock, LiveServer, signature_body
from paysign.bootstrap import Runtime
from paysign.services import accounts, catalog, keys, policy
from portal.conftest import code, csrf_of, error_of, redirected, signed_in

AUDIT = (Path(__file__).parent / "page_audit.js").read_text()


def _listing(url: str) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "name": f"weather_now_{secrets.token_hex(2)}",
        "url": url,
        "path": "/v1/weather",
        "description": "Current weather for a city.",
        "priceUsdc": 0.02,
        "method": "GET",
        "tier": "PREMIUM",
        "sandboxAvailable": True,
        "inputs": {"path": [], "query": [], "header": []},
        "tags": ["weather"],
        "source": {
            "freshnessBand": "hourly",
            "uptime": "99%",
            "license": "commercial",
            "underlyingSource": "Test Met Office",
        },
    }


class Queue:
    """A holder whose policy asks approval for every seller, with a catalog listing and an
    unlisted shop (three of its paths) waiting; signed in over plain HTTP."""

    def __init__(
        self, browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
    ) -> None:
        self.browser, self.runtime, self.holder = browser, runtime, holder
        self.clock: FrozenClock = runtime.clock  # type: ignore[assignment]
        tag = secrets.token_hex(3)
        self.listing = _listing(f"https://listed-{tag}.example.com/api")
        catalog.import_catalog(runtime.db, runtime.clock, {"catalog": [self.listing]})
        document = policy.get_policy(runtime.db, email=holder.email)
        document.pop("pending", None)
        document["approval"] = "all"
        policy.set_policy(runtime.db, runtime.clock, email=holder.email, document=document)
        issued = keys.issue_key(runtime.db, runtime.clock, email=holder.email, expires_in_days=9)
        self.auth = {"Authorization": f"Bearer {issued.api_key}"}
        self.listed = f"listed-{tag}.example.com/api/v1/weather"
        self.host = f"shop-{tag}.example.net"
        self.items = [f"{self.host}/v1/items/a", f"{self.host}/v1/items/b"]
        self.other = f"{self.host}/v2/offers"
        assert self.pay(self.listed, "20000").status_code == 403
        assert self.pay(self.listed, "15000").status_code == 403  # refused twice, a new price
        for seller in (*self.items, self.other):
            assert self.pay(seller).status_code == 403
        signed_in(browser, holder, self.clock)

    def pay(self, seller: str, amount: str = "10000") -> httpx.Response:
        body = signature_body(seller_url=f"https://{seller}", amount=amount)
        return self.browser.post("/wallets/signatures", json=body, headers=self.auth)

    def policy(self) -> dict[str, Any]:
        return policy.get_policy(self.runtime.db, email=self.holder.email)

    def fresh_code(self) -> str:
        self.clock.advance(30)
        return code(self.holder.totp_secret, self.clock)

    def decide(
        self, seller: str, scope: str | None, decision: str, totp: str = ""
    ) -> httpx.Response:
        page = self.browser.get("/portal/approvals")
        form = {"csrf": csrf_of(page), "seller": seller, "decision": decision, "totp": totp}
        if scope is not None:
            form["scope"] = scope
        return self.browser.post("/portal/approvals", data=form)


@pytest.fixture
def queue(browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount) -> Queue:
    return Queue(browser, runtime, holder)


def _row(page: httpx.Response, seller: str) -> str:
    for row in re.findall(r"<tr>(.*?)</tr>", page.text, re.S):
        if f'data-label="Seller">{seller}</td>' in row:
            return str(row)
    raise AssertionError(f"{seller} is not shown: {page.text}")


def _scopes(row: str) -> list[tuple[str, str]]:
    options = re.findall(r'<option value="([^"]+)">([^<]+)</option>', row)
    return [(unescape(value), unescape(text)) for value, text in options]


def test_each_seller_shows_its_terms_listing_and_refusals(queue: Queue) -> None:
    page = queue.browser.get("/portal/approvals")
    assert page.status_code == 200

    listed = _row(page, queue.listed)
    assert f"<strong>{queue.listing['name']}</strong>" in listed
    assert "Premium tier, listed at 0.02 USDC" in listed
    assert '<td data-label="Amount (USDC)">0.015</td>' in listed  # the latest price asked
    assert f'data-label="Pays to">{PAY_TO.lower()}</td>' in listed
    assert '<td data-label="Network">Base Sepolia</td>' in listed
    assert '<td data-label="Refused requests">2</td>' in listed

    item = _row(page, queue.items[0])
    assert "not in the catalog" in item and "<strong>" not in item
    assert '<td data-label="Refused requests">1</td>' in item
    assert _scopes(item) == [
        (queue.items[0], "This path"),
        (f"{queue.host}/v1/items", "Under /v1/items/"),
        (f"{queue.host}/v1", "Under /v1/"),
        (queue.host, f"All of {queue.host}"),
    ]


def test_approving_a_prefix_settles_every_seller_under_it(queue: Queue) -> None:
    prefix = f"{queue.host}/v1/items"
    refused = queue.decide(queue.items[0], prefix, "allow")
    assert refused.status_code == 401  # approving loosens the policy: a fresh code first
    assert prefix not in queue.policy()["allow"]

    done = redirected(
        queue.browser,
        queue.decide(queue.items[0], prefix, "allow", queue.fresh_code()),
        "/portal/approvals",
    )
    assert f"{prefix}: approved (allow list)." in done.text
    after = queue.policy()
    assert prefix in after["allow"]
    assert sorted(after["pending"]) == sorted([queue.listed, queue.other])
    assert queue.pay(queue.items[1]).status_code == 200  # settled with its neighbour
    assert queue.pay(f"{queue.host}/v1/items/c").status_code == 200  # and one not yet seen
    assert queue.pay(queue.other).status_code == 403  # outside the prefix: still waiting


def test_approving_the_whole_host(queue: Queue) -> None:
    done = redirected(
        queue.browser,
        queue.decide(queue.other, queue.host, "allow", queue.fresh_code()),
        "/portal/approvals",
    )
    assert f"{queue.host}: approved (allow list)." in done.text
    after = queue.policy()
    assert queue.host in after["allow"] and after["pending"] == [queue.listed]
    assert queue.pay(f"{queue.host}/anything/else").status_code == 200


def test_denying_the_whole_host_needs_no_code(queue: Queue) -> None:
    done = redirected(
        queue.browser, queue.decide(queue.items[1], queue.host, "deny"), "/portal/approvals"
    )
    assert f"{queue.host}: denied (deny list)." in done.text
    after = queue.policy()
    assert queue.host in after["deny"] and after["pending"] == [queue.listed]
    assert queue.pay(queue.other).json()["type"].endswith("/seller-denied")


def test_the_exact_path_is_the_default_and_settles_only_that_seller(queue: Queue) -> None:
    done = redirected(
        queue.browser, queue.decide(queue.items[0], None, "deny"), "/portal/approvals"
    )
    assert f"{queue.items[0]}: denied (deny list)." in done.text
    assert sorted(queue.policy()["pending"]) == sorted([queue.listed, queue.items[1], queue.other])


@pytest.mark.parametrize(
    "scope",
    [
        "*.example.net",  # a wildcard: every sibling host
        "example.net",  # the parent domain
        "other.example.net/v1",  # another host
        "{host}/v2",  # a path the seller is not under
        "{host}/v1/items/a/deeper",  # narrower than the seller: not one of the choices
        "{host}:8443",  # another port
        "not a host/x",
    ],
)
def test_a_scope_the_form_did_not_offer_is_refused_and_spends_no_code(
    queue: Queue, scope: str
) -> None:
    """A tampered form cannot write a rule wider than (or beside) the choices it showed."""
    before = queue.policy()
    totp = queue.fresh_code()
    for decision in ("allow", "deny"):
        refused = queue.decide(queue.items[0], scope.format(host=queue.host), decision, totp)
        assert refused.status_code == 400
        assert error_of(refused).startswith("Nothing was changed: ")
        assert queue.policy() == before
    # The code was not spent: it still approves a choice the form offers.
    assert queue.decide(queue.items[0], f"{queue.host}/v1", "allow", totp).status_code == 303


@pytest.fixture
def chromium_holder(
    queue: Queue, chromium: Browser, server: LiveServer
) -> Iterator[BrowserContext]:
    cookies = [
        {"name": c.name, "value": c.value or "", "url": server.url}
        for c in queue.browser.cookies.jar
    ]
    context = chromium.new_context(base_url=server.url)
    context.add_cookies(cookies)  # type: ignore[arg-type]
    yield context
    context.close()


def _fits(page: Page, name: str, folder: Path, width: int) -> None:
    page.screenshot(path=folder / f"{name}-{width}.png", full_page=True)
    problems = page.evaluate(AUDIT)
    assert not problems, f"{name} at {width}px: {problems}"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("width", [390, 1280])
def test_deciding_by_prefix_in_a_real_browser(
    queue: Queue,
    chromium_holder: BrowserContext,
    tmp_path_factory: pytest.TempPathFactory,
    width: int,
) -> None:
    """At a phone's and a desktop's width the holder reads the listing and the terms, picks
    "Under /v1/items/" for one seller, and both sellers under it are approved; the page fits
    the window (screenshots are written to the printed folder)."""
    folder = tmp_path_factory.mktemp("approval-screens")
    print(f"approval screenshots: {folder}")
    page = chromium_holder.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/portal/approvals")
    _fits(page, "approvals", folder, width)
    listed = page.locator("#pending tr", has_text=queue.listed)
    expect(listed.locator(".listing")).to_contain_text(queue.listing["name"])
    expect(listed.locator(".listing")).to_contain_text("Premium tier, listed at 0.02 USDC")

    row = page.locator("#pending tr", has_text=queue.items[0])
    row.get_by_label("Rule").select_option(label="Under /v1/items/")
    row.get_by_label("Authenticator code to approve").fill(queue.fresh_code())
    with page.expect_navigation():
        row.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_text(f"{queue.host}/v1/items: approved (allow list).")).to_be_visible()
    for seller in queue.items:
        expect(page.locator("#pending", has_text=seller)).to_have_count(0)
    expect(page.locator("#pending tr", has_text=queue.other)).to_have_count(1)
    _fits(page, "approvals-after", folder, width)
    assert f"{queue.host}/v1/items" in queue.policy()["allow"]
