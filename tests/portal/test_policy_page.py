"""The policy page: tightening needs no code, loosening needs a fresh one; caps are in USDC."""

from __future__ import annotations

import httpx

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.services import accounts, policy
from portal.conftest import PASSWORD, code, csrf_of, error_of, redirected, sign_in


def _settings(csrf: str, **overrides: str) -> dict[str, str]:
    form = {
        "csrf": csrf,
        "approval": "openEcosystem",
        "premium": "on",
        "standard": "on",
        "openEcosystem": "on",
        "perPayment": "1",
        "daily": "10",
        "monthly": "100",
        "totp": "",
    }
    form.update(overrides)
    return {k: v for k, v in form.items() if v != "off"}


def test_policy_tighten_freely_loosen_with_a_fresh_code(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    used = code(holder.totp_secret, clock)
    assert sign_in(browser, holder.email, PASSWORD, used).status_code == 303
    page = browser.get("/portal/policy")
    assert page.status_code == 200 and 'value="10"' in page.text
    csrf = csrf_of(page)

    tighter = browser.post("/portal/policy/settings", data=_settings(csrf, daily="2.5"))
    assert "Policy saved." in redirected(browser, tighter, "/portal/policy").text
    got = policy.get_policy(runtime.db, email=holder.email)
    assert got["caps"]["daily"] == 2_500_000

    looser = browser.post("/portal/policy/settings", data=_settings(csrf, daily=""))
    assert looser.status_code == 401 and "fresh authenticator code" in error_of(looser)
    reused = browser.post("/portal/policy/settings", data=_settings(csrf, daily="", totp=used))
    assert reused.status_code == 401
    assert policy.get_policy(runtime.db, email=holder.email)["caps"]["daily"] == 2_500_000

    bad = browser.post("/portal/policy/settings", data=_settings(csrf, daily="1.0000001"))
    assert bad.status_code == 400

    clock.advance(30)
    fresh = code(holder.totp_secret, clock)
    done = browser.post("/portal/policy/settings", data=_settings(csrf, daily="", totp=fresh))
    assert done.status_code == 303, done.text
    assert policy.get_policy(runtime.db, email=holder.email)["caps"]["daily"] is None

    # Rules: a deny rule needs no code; removing it (loosening) does; bad rules are refused.
    deny = {"csrf": csrf, "action": "add", "kind": "deny", "rule": "https://Bad.Example.com/v1/"}
    assert browser.post("/portal/policy/rules", data=deny).status_code == 303
    assert policy.get_policy(runtime.db, email=holder.email)["deny"] == ["bad.example.com/v1"]
    invalid = browser.post("/portal/policy/rules", data={**deny, "rule": "*.com"})
    assert invalid.status_code == 400
    remove = {**deny, "action": "remove", "rule": "bad.example.com/v1"}
    assert browser.post("/portal/policy/rules", data=remove).status_code == 401
    allow = {"csrf": csrf, "action": "add", "kind": "allow", "rule": "good.example.com"}
    assert browser.post("/portal/policy/rules", data=allow).status_code == 401
    assert policy.get_policy(runtime.db, email=holder.email)["allow"] == []
    clock.advance(30)
    allowed = browser.post(
        "/portal/policy/rules", data={**allow, "totp": code(holder.totp_secret, clock)}
    )
    assert allowed.status_code == 303
    clock.advance(30)
    removed = browser.post(
        "/portal/policy/rules", data={**remove, "totp": code(holder.totp_secret, clock)}
    )
    assert removed.status_code == 303
    final = policy.get_policy(runtime.db, email=holder.email)
    assert final["allow"] == ["good.example.com"] and final["deny"] == []

    # Without the CSRF token nothing changes.
    forged = browser.post("/portal/policy/settings", data=_settings("wrong", daily="1"))
    assert forged.status_code == 403
    assert policy.get_policy(runtime.db, email=holder.email)["caps"]["daily"] is None
