"""Post/Redirect/Get: a form that changed something answers 303 to the page that shows the
result, with its notice carried once; reloading that page sends nothing again. Forms whose
answer shows a secret once (a new key, an authenticator secret) answer with the page itself,
and sending them again changes nothing. ``GET /`` leads to the portal."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Browser, Request, expect

from conftest import FrozenClock, LiveServer, signature_body
from paysign.bootstrap import Runtime
from paysign.services import accounts, keys, policy
from portal.conftest import code, csrf_of, redirected, signed_in

NOTICE = '<p class="notice" role="status">'


def _policy_form(csrf: str, daily: str) -> dict[str, str]:
    return {
        "csrf": csrf,
        "approval": "openEcosystem",
        "premium": "on",
        "standard": "on",
        "openEcosystem": "on",
        "perPayment": "1",
        "daily": daily,
        "monthly": "100",
    }


def test_a_saved_form_redirects_and_its_notice_shows_once(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    page = signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    saved = browser.post("/portal/policy/settings", data=_policy_form(csrf_of(page), "2"))
    assert saved.status_code == 303 and saved.headers["location"] == "/portal/policy"
    carried = [h for h in saved.headers.get_list("set-cookie") if "notice" in h]
    assert carried and "HttpOnly" in carried[0] and "SameSite=lax" in carried[0]
    shown = redirected(browser, saved, "/portal/policy")
    assert f"{NOTICE}Policy saved.</p>" in shown.text
    assert NOTICE not in browser.get("/portal/policy").text  # once, not on every visit
    assert policy.get_policy(runtime.db, email=holder.email)["caps"]["daily"] == 2_000_000

    ended = browser.post("/portal/settings/sessions", data={"csrf": csrf_of(page)})
    assert "0 other session(s) signed out." in redirected(browser, ended, "/portal/settings").text


def test_a_refused_form_answers_with_the_page_and_its_error(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    page = signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    bad = browser.post("/portal/policy/settings", data=_policy_form(csrf_of(page), "1.0000001"))
    assert bad.status_code == 400 and 'class="error"' in bad.text
    assert "notice" not in bad.headers.get("set-cookie", "")


def test_sending_the_key_form_again_creates_no_second_key(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    page = signed_in(browser, holder, clock)
    clock.advance(30)
    form = {"csrf": csrf_of(page), "days": "30", "totp": code(holder.totp_secret, clock)}
    created = browser.post("/portal/keys", data=form)
    assert created.status_code == 200 and 'id="new-key"' in created.text
    again = browser.post("/portal/keys", data=form)  # what a reload of that page sends
    assert again.status_code in (400, 401) and 'id="new-key"' not in again.text
    keys_page = browser.get("/portal/keys").text
    assert keys_page.count("<code>psk_") == 1


def test_reloading_after_a_decision_sends_nothing_again(
    chromium: Browser,
    server: LiveServer,
    browser: httpx.Client,
    runtime: Runtime,
    holder: accounts.CreatedAccount,
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    issued = keys.issue_key(runtime.db, clock, email=holder.email, expires_in_days=30)
    seller = "https://reload.example.net/v1"
    auth = {"Authorization": f"Bearer {issued.api_key}"}
    assert (
        browser.post(
            "/wallets/signatures", json=signature_body(seller_url=seller), headers=auth
        ).status_code
        == 403
    )
    signed_in(browser, holder, clock)
    context = chromium.new_context(base_url=server.url)
    try:
        context.add_cookies(
            [
                {"name": c.name, "value": c.value or "", "url": server.url}
                for c in browser.cookies.jar
            ]
        )
        page = context.new_page()
        page.goto("/portal/approvals")
        with page.expect_navigation():
            page.locator("tr", has_text="reload.example.net").get_by_role(
                "button", name="Deny", exact=True
            ).click()
        assert page.url == f"{server.url}/portal/approvals"
        expect(page.locator(".notice")).to_have_text("reload.example.net/v1: denied (deny list).")

        sent: list[Request] = []
        page.on("request", lambda request: sent.append(request))
        page.reload()
        assert [r.method for r in sent if r.url.startswith(f"{server.url}/portal/approvals")] == [
            "GET"
        ]
        expect(page.locator(".notice")).to_have_count(0)
        assert policy.get_policy(runtime.db, email=holder.email)["deny"] == [
            "reload.example.net/v1"
        ]
    finally:
        context.close()


@pytest.mark.parametrize("signed", [False, True])
def test_the_root_leads_to_the_portal(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount, signed: bool
) -> None:
    if signed:
        signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    root = browser.get("/")
    assert root.status_code == 303 and root.headers["location"] == "/portal/"
    landed = browser.get("/", follow_redirects=True)
    assert landed.status_code == 200
    assert str(landed.url).endswith("/portal/sign-in" if not signed else "/portal/")
