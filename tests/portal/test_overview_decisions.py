"""The overview puts what a holder decides on in front of them: the sellers waiting for approval
with their price and payee, the per-payment cap beside the window caps, today's refusals by
reason (yesterday's not counted), and the key's expiry."""

from __future__ import annotations

import re

import httpx

from conftest import PAY_TO, FrozenClock, signature_body
from paysign.bootstrap import Runtime
from paysign.services import accounts, keys, policy
from portal.conftest import signed_in

DAY = 86_400


def _set_per_payment(runtime: Runtime, email: str, per_payment: int) -> None:
    document = policy.get_policy(runtime.db, email=email)
    document.pop("pending", None)
    document["caps"] = {**document["caps"], "perPayment": per_payment}
    policy.set_policy(runtime.db, runtime.clock, email=email, document=document)


def _section(page: httpx.Response, element_id: str, end: str) -> str:
    return page.text.split(f'id="{element_id}"')[1].split(end)[0]


def test_the_overview_shows_what_waits_and_why_payments_were_refused(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    issued = keys.issue_key(runtime.db, clock, email=holder.email, expires_in_days=30)
    auth = {"Authorization": f"Bearer {issued.api_key}"}

    def pay(seller: str, amount: str = "10000") -> int:
        body = signature_body(seller_url=f"https://{seller}", amount=amount)
        clock.advance(1)  # one after the other, as the pending list orders them
        return browser.post("/wallets/signatures", json=body, headers=auth).status_code

    assert pay("yesterday.example.net/x") == 403  # refused the day before: not today's
    clock.advance(DAY)
    policy.decide_seller(runtime.db, clock, email=holder.email, seller="bad.example", kind="deny")
    policy.decide_seller(runtime.db, clock, email=holder.email, seller="ok.example", kind="allow")
    _set_per_payment(runtime, holder.email, 50_000)
    assert pay("quotes.example.net/v1", "20000") == 403  # allow-pending
    assert pay("quotes.example.net/v1", "25000") == 403  # again, at a new price
    assert pay("news.example.org/feed") == 403  # allow-pending
    assert pay("bad.example/x") == 403  # seller-denied
    assert pay("ok.example/big", "60000") == 403  # spend-cap-exceeded (per payment)
    assert pay("ok.example/small") == 200

    page = signed_in(browser, holder, clock)
    assert page.status_code == 200

    waiting = _section(page, "pending-sellers", "</table>")
    rows = re.findall(r"<tr>(.*?)</tr>", waiting, re.S)[1:]
    assert [re.search(r'data-label="Seller">([^<]+)<', row).group(1) for row in rows] == [  # type: ignore[union-attr]
        "yesterday.example.net/x",
        "quotes.example.net/v1",
        "news.example.org/feed",
    ]
    assert '<td data-label="Price (USDC)">0.025</td>' in rows[1]  # the latest price
    assert f'data-label="Pays to">{PAY_TO.lower()}</td>' in rows[1]
    assert '<td data-label="Network">Base Sepolia</td>' in rows[1]
    assert '<td data-label="Refused requests">2</td>' in rows[1]

    assert "Each payment: at most <strong>0.05 USDC</strong>." in page.text

    refused = _section(page, "refusals-today", "</table>")
    counts = re.findall(r'<span class="mono hint">([a-z-]+)</span></th><td>(\d+)</td>', refused)
    assert counts == [("allow-pending", "3"), ("seller-denied", "1"), ("spend-cap-exceeded", "1")]
    assert "seller waiting for your approval" in refused and "over a spend cap" in refused
    assert 'href="/portal/activity?decision=refused&amp;from=2026-09-22"' in page.text

    expiry = _section(page, "key-expiry", "</td>")
    assert '<time datetime="2026-10-21T14:13:20Z"' in expiry  # issued before the first payment


def test_a_quiet_day_says_so(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    page = signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    assert 'id="refusals-today">No payment was refused today.' in page.text
    assert 'id="pending-sellers"' not in page.text
