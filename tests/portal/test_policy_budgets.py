"""Allow rules with a budget on the policy page: shown with their caps, removed like any rule;
adding the same rule again keeps the one entry."""

from __future__ import annotations

import httpx

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.services import accounts, policy
from portal.conftest import PASSWORD, code, csrf_of, sign_in


def test_a_budgeted_allow_rule_is_shown_and_removed(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    doc = policy.get_policy(runtime.db, email=holder.email)
    doc["allow"] = [{"seller": "api.example.com/v1", "daily": 2_000_000}, "b.example.com"]
    policy.set_policy(runtime.db, clock, email=holder.email, document=doc)
    assert sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock)).status_code
    page = browser.get("/portal/policy")
    assert "budget: 2 USDC a day" in page.text
    csrf = csrf_of(page)

    clock.advance(30)
    again = {
        "csrf": csrf,
        "kind": "allow",
        "action": "add",
        "rule": "api.example.com/v1",
        "totp": code(holder.totp_secret, clock),
    }
    assert browser.post("/portal/policy/rules", data=again).status_code == 303
    allow = policy.get_policy(runtime.db, email=holder.email)["allow"]
    assert allow == [
        {"seller": "api.example.com/v1", "daily": 2_000_000, "monthly": None},
        "b.example.com",
    ]
    remove = {**again, "action": "remove", "totp": ""}
    assert browser.post("/portal/policy/rules", data=remove).status_code == 303
    assert policy.get_policy(runtime.db, email=holder.email)["allow"] == ["b.example.com"]
