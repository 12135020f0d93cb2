"""Bulk approvals: a selection of pending sellers approved with one fresh authenticator code,
or denied with none, as one all-or-nothing policy change."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect

from conftest import FrozenClock, LiveServer, signature_body
from paysign.bootstrap import Runtime
from paysign.services import accounts, keys, policy
from portal.conftest import code, csrf_of, error_of, redirected, signed_in


class Queue:
    """An account holder signed in, with sellers their agent tried to pay waiting for them."""

    def __init__(
        self, browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
    ) -> None:
        self.browser, self.runtime, self.holder = browser, runtime, holder
        self.clock: FrozenClock = runtime.clock  # type: ignore[assignment]
        issued = keys.issue_key(runtime.db, runtime.clock, email=holder.email, expires_in_days=9)
        self.auth = {"Authorization": f"Bearer {issued.api_key}"}
        tag = secrets.token_hex(3)
        self.sellers = [f"s{i}-{tag}.example.net/quote" for i in range(3)]
        for seller in self.sellers:
            assert self.pay(seller).status_code == 403  # allow-pending
        signed_in(browser, holder, self.clock)

    def pay(self, seller: str) -> httpx.Response:
        body = signature_body(seller_url=f"https://{seller}")
        return self.browser.post("/wallets/signatures", json=body, headers=self.auth)

    def policy(self) -> dict[str, Any]:
        return policy.get_policy(self.runtime.db, email=self.holder.email)

    def fresh_code(self) -> str:
        self.clock.advance(30)
        return code(self.holder.totp_secret, self.clock)

    def bulk(
        self, sellers: list[str], decision: str | None, totp: str = "", csrf: str | None = None
    ) -> httpx.Response:
        page = self.browser.get("/portal/approvals")
        fields: dict[str, str | list[str]] = {
            "csrf": csrf_of(page) if csrf is None else csrf,
            "seller": sellers,  # repeated, as the checkboxes send it
        }
        if decision is not None:
            fields["decision"] = decision
        if totp:
            fields["totp"] = totp
        return self.browser.post("/portal/approvals/bulk", data=fields)


@pytest.fixture
def queue(browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount) -> Queue:
    return Queue(browser, runtime, holder)


def test_the_page_offers_a_checkbox_per_seller_and_the_bulk_buttons(queue: Queue) -> None:
    page = queue.browser.get("/portal/approvals")
    for seller in queue.sellers:
        assert f'name="seller" value="{seller}" form="bulk"' in page.text
    assert 'action="/portal/approvals/bulk" id="bulk"' in page.text
    assert "Approve selected" in page.text and "Deny selected" in page.text


def test_one_fresh_code_approves_the_whole_selection(queue: Queue) -> None:
    chosen, left = queue.sellers[:2], queue.sellers[2]
    no_code = queue.bulk(chosen, "allow")
    assert no_code.status_code == 401
    assert "enter a fresh authenticator code" in error_of(no_code)
    assert sorted(queue.policy()["pending"]) == sorted(queue.sellers)

    approved = redirected(
        queue.browser, queue.bulk(chosen, "allow", queue.fresh_code()), "/portal/approvals"
    )
    assert "2 seller(s) approved (allow list)" in approved.text
    after = queue.policy()
    assert after["pending"] == [left]
    assert set(chosen) <= set(after["allow"])
    assert all(queue.pay(seller).status_code == 200 for seller in chosen)
    assert queue.pay(left).status_code == 403

    # The code was spent on the first batch: the same one cannot approve another.
    replay = queue.bulk([left], "allow", code(queue.holder.totp_secret, queue.clock))
    assert replay.status_code == 401 and queue.policy()["pending"] == [left]


def test_one_invalid_seller_refuses_the_batch_and_spends_no_code(queue: Queue) -> None:
    before = queue.policy()
    totp = queue.fresh_code()
    refused = queue.bulk([queue.sellers[0], "not a host/x"], "allow", totp)
    assert refused.status_code == 400
    assert error_of(refused).startswith("Nothing was changed: ")
    assert queue.policy() == before
    # Nothing was written and the code was not spent: it still approves a valid batch.
    assert queue.bulk([queue.sellers[0]], "allow", totp).status_code == 303
    denied = queue.bulk(["ok.example.com", "*.*.bad"], "deny")
    assert denied.status_code == 400 and "ok.example.com" not in queue.policy()["deny"]


def test_deny_selected_needs_no_code(queue: Queue) -> None:
    denied = redirected(queue.browser, queue.bulk(queue.sellers, "deny"), "/portal/approvals")
    assert 'id="no-pending"' in denied.text
    after = queue.policy()
    assert after["pending"] == [] and set(queue.sellers) <= set(after["deny"])
    assert queue.pay(queue.sellers[0]).json()["type"].endswith("/seller-denied")


@pytest.mark.parametrize(
    ("sellers", "decision", "message"),
    [
        ([], "deny", "Select at least one seller."),
        (["x.example.com"] * 201, "deny", "Decide at most 200 sellers at a time."),
        (["x.example.com"], None, "Approve or deny the selection."),
        (["x.example.com"], "maybe", "Approve or deny the selection."),
    ],
)
def test_a_bad_batch_is_a_400_and_changes_nothing(
    queue: Queue, sellers: list[str], decision: str | None, message: str
) -> None:
    before = queue.policy()
    response = queue.bulk(sellers, decision)
    assert response.status_code == 400 and error_of(response) == message
    assert queue.policy() == before


def test_a_batch_without_the_csrf_token_changes_nothing(queue: Queue) -> None:
    before = queue.policy()
    assert queue.bulk(queue.sellers, "deny", csrf="forged").status_code == 403
    assert queue.policy() == before


def test_one_by_one_still_works_beside_the_selection(queue: Queue) -> None:
    page = queue.browser.get("/portal/approvals")
    one = queue.browser.post(
        "/portal/approvals",
        data={"csrf": csrf_of(page), "seller": queue.sellers[1], "decision": "deny"},
    )
    shown = redirected(queue.browser, one, "/portal/approvals")
    assert f"{queue.sellers[1]}: denied (deny list)." in shown.text
    assert queue.sellers[1] not in queue.policy()["pending"]


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"decision": "maybe"}, 400),  # neither approve nor deny
        ({"decision": "allow", "seller": "not a host/x"}, 400),
        ({"decision": "allow"}, 401),  # approving loosens: no code, no change
        ({"decision": "deny", "csrf": "forged"}, 403),
    ],
)
def test_one_by_one_refusals_change_nothing(
    queue: Queue, fields: dict[str, str], status: int
) -> None:
    before = queue.policy()
    page = queue.browser.get("/portal/approvals")
    form = {"csrf": csrf_of(page), "seller": queue.sellers[0], **fields}
    assert queue.browser.post("/portal/approvals", data=form).status_code == status
    assert queue.policy() == before


def test_select_all_in_a_real_browser(
    queue: Queue, chromium: Browser, server: LiveServer, runtime: Runtime
) -> None:
    """With the portal's script the header box ticks every seller and one code approves them
    all; without it the box stays hidden and each seller can still be ticked by hand."""
    cookies = [
        {"name": c.name, "value": c.value or "", "url": server.url}
        for c in queue.browser.cookies.jar
    ]
    plain = chromium.new_context(base_url=server.url, java_script_enabled=False)
    try:
        plain.add_cookies(cookies)  # type: ignore[arg-type]
        page = plain.new_page()
        page.goto("/portal/approvals")
        expect(page.locator("#select-all")).to_be_hidden()
    finally:
        plain.close()

    context = chromium.new_context(base_url=server.url)
    try:
        context.add_cookies(cookies)  # type: ignore[arg-type]
        page = context.new_page()
        page.goto("/portal/approvals")
        page.locator("#select-all").check()
        for seller in queue.sellers:
            expect(page.get_by_label(f"Select {seller}")).to_be_checked()
        page.fill("#bulk-totp", queue.fresh_code())
        with page.expect_navigation():
            page.get_by_role("button", name="Approve selected", exact=True).click()
        expect(page.locator("#no-pending")).to_be_visible()
    finally:
        context.close()
    assert all(seller in queue.policy()["allow"] for seller in queue.sellers)
