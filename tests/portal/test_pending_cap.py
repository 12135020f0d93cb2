"""The approvals queue is bounded: an agent's key paying made-up sellers cannot grow it past
``MAX_PENDING_SELLERS``, nor the holder's approvals page with it. Over real HTTP, on SQLite and
PostgreSQL; each seller's latest terms (payTo, amount, network) are shown before approval."""

from __future__ import annotations

import re
import secrets
from html import unescape
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from conftest import PAY_TO, FrozenClock, signature_body
from paysign.bootstrap import Runtime
from paysign.policy.decide import MAX_PENDING_SELLERS
from paysign.policy.rules import parse_rule
from paysign.services import accounts, keys, policy
from paysign.store.schema import pending_sellers, refusals
from portal.conftest import code, csrf_of, error_of, redirected, signed_in

OTHER_PAY_TO = "0x" + "ab" * 20


class Agent:
    """An account holder's agent, its key in hand, paying sellers nobody approved."""

    def __init__(
        self, browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
    ) -> None:
        self.browser, self.runtime, self.holder = browser, runtime, holder
        issued = keys.issue_key(runtime.db, runtime.clock, email=holder.email, expires_in_days=9)
        self.auth = {"Authorization": f"Bearer {issued.api_key}"}
        self.tag = secrets.token_hex(3)

    def seller(self, i: int) -> str:
        return f"made-up-{i}-{self.tag}.example.net/quote"

    def pay(self, seller: str, *, amount: str = "10000", pay_to: str = PAY_TO) -> httpx.Response:
        body: Any = signature_body(seller_url=f"https://{seller}", amount=amount)
        body["paymentRequired"]["accepts"][0]["payTo"] = pay_to
        return self.browser.post("/wallets/signatures", json=body, headers=self.auth)

    def fill(self) -> list[str]:
        """The queue made full, one made-up seller at a time; the sellers, oldest first."""
        sellers = [self.seller(i) for i in range(MAX_PENDING_SELLERS)]
        clock: FrozenClock = self.runtime.clock  # type: ignore[assignment]
        for seller in sellers:
            clock.advance(1)  # one a second: the queue lists them in that order
            answer = self.pay(seller)
            assert answer.status_code == 403, answer.text
            assert answer.json()["type"].endswith("/allow-pending")
        return sellers

    def pending(self) -> dict[str, Any]:
        with self.runtime.db.read() as conn:
            rows = conn.execute(
                sa.select(pending_sellers).where(
                    pending_sellers.c.account_id == self.holder.account_id
                )
            ).all()
        return {f"{r.host}{r.path}": r for r in rows}


@pytest.fixture
def agent(browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount) -> Agent:
    return Agent(browser, runtime, holder)


def _shown(page: httpx.Response) -> list[str]:
    found = re.findall(r'<td class="mono" data-label="Seller">([^<]*)</td>', page.text)
    return [unescape(s) for s in found]


def _link(page: httpx.Response, name: str) -> str | None:
    found = re.search(rf'<a id="{name}" href="([^"]+)"', page.text)
    return unescape(found.group(1)) if found else None


def test_a_full_queue_refuses_a_new_seller_and_adds_nothing(agent: Agent) -> None:
    sellers = agent.fill()

    refused = agent.pay(agent.seller(MAX_PENDING_SELLERS))
    assert refused.status_code == 403, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    problem = refused.json()
    assert problem["type"].endswith("/pending-approvals-full")
    assert problem["title"] == "Too many sellers waiting for approval"
    assert problem["limit"] == MAX_PENDING_SELLERS
    assert problem["seller"] == agent.seller(MAX_PENDING_SELLERS)
    assert "Stop trying new sellers" in problem["detail"] and "portal" in problem["detail"]
    waiting = agent.pending()
    assert len(waiting) == MAX_PENDING_SELLERS and set(waiting) == set(sellers)

    # Its page says what to do: the holder decides the waiting sellers; the agent stops.
    page = agent.browser.get("/problems/" + problem["type"].rsplit("/", 1)[1])
    assert page.status_code == 200
    assert "approve or deny" in page.text and "Stop trying new sellers" in page.text

    # A seller already waiting still answers allow-pending, its latest terms kept.
    again = agent.pay(sellers[7], amount="2500000", pay_to=OTHER_PAY_TO)
    assert again.status_code == 403 and again.json()["type"].endswith("/allow-pending")
    entry = agent.pending()[sellers[7]]
    assert (entry.refused_count, entry.pay_to, entry.amount) == (2, OTHER_PAY_TO, 2_500_000)
    assert entry.network == "eip155:84532"
    assert len(agent.pending()) == MAX_PENDING_SELLERS

    # The refusal is on the record for the holder, like every refusal.
    with agent.runtime.db.read() as conn:
        reasons = conn.execute(
            sa.select(refusals.c.reason, refusals.c.seller_host).where(
                refusals.c.account_id == agent.holder.account_id
            )
        ).all()
    full_host = agent.seller(MAX_PENDING_SELLERS).partition("/")[0]
    assert ("pending-approvals-full", full_host) in reasons

    # Deciding one seller makes room for one new seller, and only one.
    policy.decide_rules(
        agent.runtime.db,
        agent.runtime.clock,
        account_id=agent.holder.account_id,
        rules=[parse_rule(sellers[0])],
        kind="deny",
    )
    assert agent.pay(agent.seller(500)).json()["type"].endswith("/allow-pending")
    assert agent.pay(agent.seller(501)).json()["type"].endswith("/pending-approvals-full")


def test_the_approvals_page_of_a_full_queue_is_one_page_at_a_time(
    agent: Agent, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    sellers = agent.fill()
    assert agent.pay(agent.seller(MAX_PENDING_SELLERS)).status_code == 403  # full: not added
    agent.pay(sellers[60], amount="1234567", pay_to=OTHER_PAY_TO)  # latest terms on page 2
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    browser = agent.browser
    signed_in(browser, holder, clock)

    first = browser.get("/portal/approvals")
    assert first.status_code == 200
    assert _shown(first) == sellers[:50]  # oldest first, one page
    assert len(first.content) < 120_000  # 1,000 made-up sellers once made it 6.7 MB
    assert 'id="queue-full"' in first.text
    assert _link(first, "prev") is None and _link(first, "next") == "/portal/approvals?page=2"
    # Where the money would go, before approving: payTo, amount in USDC, network.
    pay_to = f'<td class="mono pay-to" data-label="Pays to">{PAY_TO.lower()}</td>'
    assert first.text.count(pay_to) == 50
    assert '>0.01</td><td data-label="Network">Base Sepolia</td>' in first.text

    second = browser.get("/portal/approvals", params={"page": "2"})
    assert second.status_code == 200
    assert _shown(second) == sellers[50:]
    assert _link(second, "prev") == "/portal/approvals?page=1" and _link(second, "next") is None
    assert f'>{OTHER_PAY_TO}</td><td data-label="Amount (USDC)">1.234567</td>' in second.text
    assert agent.seller(MAX_PENDING_SELLERS) not in first.text + second.text

    # Past the end is the last page; anything but a page number is a 400 that changes nothing.
    assert _shown(browser.get("/portal/approvals", params={"page": "9"})) == sellers[50:]
    for bad in ("0", "-1", "two", "1e3", "99999999999"):
        page = browser.get("/portal/approvals", params={"page": bad})
        assert page.status_code == 400 and "page number" in error_of(page)
        assert _shown(page) == sellers[:50]
    denied = browser.post(
        "/portal/approvals?page=x",
        data={"csrf": csrf_of(first), "seller": sellers[0], "decision": "deny"},
    )
    assert denied.status_code == 400 and len(agent.pending()) == MAX_PENDING_SELLERS

    # A decision made on page 2 shows page 2 again (the forms carry the page).
    assert 'action="/portal/approvals?page=2"' in second.text
    assert 'action="/portal/approvals/bulk?page=2" id="bulk"' in second.text
    clock.advance(30)
    approved = browser.post(
        "/portal/approvals?page=2",
        data={
            "csrf": csrf_of(second),
            "seller": sellers[99],
            "decision": "allow",
            "totp": code(holder.totp_secret, clock),
        },
    )
    shown = redirected(browser, approved, "/portal/approvals?page=2")
    assert _shown(shown) == sellers[50:99] and 'id="queue-full"' not in shown.text


def test_approvals_pages_need_a_signed_in_session(browser: httpx.Client) -> None:
    response = browser.get("/portal/approvals", params={"page": "2"})
    assert response.status_code == 303 and response.headers["location"] == "/portal/sign-in"
