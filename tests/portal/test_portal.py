"""The web portal over real HTTP on 127.0.0.1 (SQLite and PostgreSQL): sign-up, sign-in with a
one-time authenticator code, sessions, CSRF, the API key page with step-up, approvals."""

from __future__ import annotations

import re
import secrets

import httpx
import pytest

from conftest import FrozenClock, signature_body
from paysign.bootstrap import Runtime
from paysign.services import accounts, keys
from paysign.services.sign_in import CODE_ALREADY_USED, SIGN_IN_FAILED
from paysign.store import portal_repo
from portal.conftest import (
    COOKIE,
    PASSWORD,
    code,
    csrf_of,
    error_of,
    redirected,
    secret_of,
    sign_in,
    signed_in,
)


def test_sign_up_enrol_and_sign_in(browser: httpx.Client, runtime: Runtime) -> None:
    form = browser.get("/portal/sign-up")
    assert form.status_code == 200
    email = f"new-{secrets.token_hex(4)}@example.com"
    enrol = browser.post(
        "/portal/sign-up", data={"csrf": csrf_of(form), "email": email, "password": PASSWORD}
    )
    assert enrol.status_code == 200, enrol.text
    assert enrol.headers["cache-control"] == "no-store"
    secret = secret_of(enrol)
    assert "otpauth://totp/paysign:" in enrol.text and f"secret={secret}" in enrol.text
    confirmed = sign_in(browser, email, PASSWORD, code(secret, runtime.clock), csrf=csrf_of(enrol))
    assert confirmed.status_code == 303
    home = browser.get("/portal/")
    assert home.status_code == 200 and email in home.text
    assert re.search(r'id="wallet">0x[0-9a-fA-F]{40}<', home.text)

    again = browser.post(
        "/portal/sign-up", data={"csrf": csrf_of(home), "email": email, "password": PASSWORD}
    )
    assert again.status_code == 400


def test_session_cookie_attributes_and_rotation(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    form = browser.get("/portal/sign-in")
    anonymous = browser.cookies[COOKIE]
    set_cookie = form.headers["set-cookie"].lower()
    assert "httponly" in set_cookie and "samesite=lax" in set_cookie and "path=/" in set_cookie
    assert "secure" not in set_cookie  # plain http on 127.0.0.1
    response = sign_in(
        browser, holder.email, PASSWORD, code(holder.totp_secret, runtime.clock), csrf=csrf_of(form)
    )
    assert response.status_code == 303
    assert browser.cookies[COOKIE] != anonymous
    assert browser.get("/portal/").status_code == 200
    # The pre-sign-in id is dead, and ids are stored hashed.
    with runtime.db.read() as conn:
        assert portal_repo.find_session(conn, anonymous) is None
        assert portal_repo.find_session(conn, browser.cookies[COOKIE]) is None
    stale = httpx.get(f"{browser.base_url}/portal/", cookies={COOKIE: anonymous})
    assert stale.status_code == 303 and stale.headers["location"] == "/portal/sign-in"


def test_replayed_code_is_refused(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    totp = code(holder.totp_secret, runtime.clock)
    assert sign_in(browser, holder.email, PASSWORD, totp).status_code == 303
    home = browser.get("/portal/")
    browser.post("/portal/sign-out", data={"csrf": csrf_of(home)})
    assert browser.get("/portal/").status_code == 303
    replay = sign_in(browser, holder.email, PASSWORD, totp)
    assert replay.status_code == 401
    assert error_of(replay) == CODE_ALREADY_USED  # the password was right: say what to do


def test_wrong_password_and_unknown_email_look_the_same(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    totp = code(holder.totp_secret, runtime.clock)
    wrong = sign_in(browser, holder.email, "not the password at all", totp)
    unknown = sign_in(browser, "nobody-here@example.com", PASSWORD, totp)
    wrong_code = sign_in(browser, holder.email, PASSWORD, "000000" if totp != "000000" else "1")
    assert wrong.status_code == unknown.status_code == wrong_code.status_code == 401
    assert error_of(wrong) == error_of(unknown) == error_of(wrong_code) == SIGN_IN_FAILED


def test_lockout_after_repeated_failures(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    limit = runtime.settings.oauth_max_failures_per_account
    for _ in range(limit):
        assert sign_in(browser, holder.email, "wrong password!!", "123456").status_code == 401
    locked = sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, runtime.clock))
    assert locked.status_code == 429
    assert "Too many failed sign-ins" in error_of(locked)
    assert browser.get("/portal/").status_code == 303
    runtime.clock.advance(runtime.settings.oauth_failure_window_seconds + 1)  # type: ignore[attr-defined]
    assert (
        sign_in(
            browser, holder.email, PASSWORD, code(holder.totp_secret, runtime.clock)
        ).status_code
        == 303
    )


def test_idle_and_absolute_timeouts(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    assert signed_in(browser, holder, clock).status_code == 200
    clock.advance(runtime.settings.portal_session_idle_seconds - 10)
    assert browser.get("/portal/").status_code == 200  # activity keeps it alive
    clock.advance(runtime.settings.portal_session_idle_seconds + 1)
    assert browser.get("/portal/").status_code == 303

    browser.cookies.clear()
    clock.advance(30)
    assert signed_in(browser, holder, clock).status_code == 200
    step = runtime.settings.portal_session_idle_seconds - 60
    for _ in range(runtime.settings.portal_session_absolute_seconds // step + 1):
        clock.advance(step)
        if browser.get("/portal/").status_code == 303:
            break
    else:
        pytest.fail("the session outlived its absolute timeout")


def test_csrf_missing_or_wrong_changes_nothing(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    keys.issue_key(runtime.db, runtime.clock, email=holder.email, expires_in_days=30)
    signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    for data in ({}, {"csrf": "wrong"}, {"csrf": ""}):
        refused = browser.post("/portal/keys/revoke", data=data)
        assert refused.status_code == 403
        approve = browser.post(
            "/portal/approvals", data={**data, "seller": "evil.example.com", "decision": "allow"}
        )
        assert approve.status_code == 403
        assert browser.post("/portal/sign-out", data=data).status_code == 403
    page = browser.get("/portal/keys")
    assert 'id="active-key"' in page.text  # still active
    assert browser.get("/portal/").status_code == 200  # still signed in
    # A sign-in form without the session's token is refused too.
    other = httpx.Client(base_url=str(browser.base_url))
    with other:
        response = sign_in(
            other,
            holder.email,
            PASSWORD,
            code(holder.totp_secret, runtime.clock),  # type: ignore[arg-type]
            csrf="forged",
        )
        assert response.status_code == 403


def test_key_step_up_signature_and_approval(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    used = code(holder.totp_secret, clock)
    assert sign_in(browser, holder.email, PASSWORD, used).status_code == 303
    page = browser.get("/portal/keys")
    assert "Create a key" in page.text
    # The sign-in code is spent: creating a key needs a fresh one.
    stale = browser.post("/portal/keys", data={"csrf": csrf_of(page), "days": "30", "totp": used})
    assert stale.status_code == 401 and 'id="new-key"' not in stale.text
    too_long = browser.post(
        "/portal/keys", data={"csrf": csrf_of(page), "days": "366", "totp": used}
    )
    assert too_long.status_code == 400
    clock.advance(30)
    created = browser.post(
        "/portal/keys",
        data={"csrf": csrf_of(page), "days": "30", "totp": code(holder.totp_secret, clock)},
    )
    assert created.status_code == 200, created.text
    api_key = re.search(r'id="new-key">(psk_[A-Za-z0-9_-]{43})<', created.text).group(1)  # type: ignore[union-attr]
    assert api_key[:8] in created.text
    assert api_key not in browser.get("/portal/keys").text  # shown once

    seller = f"https://new-{secrets.token_hex(3)}.example.net/quote"
    auth = {"Authorization": f"Bearer {api_key}"}
    pending = browser.post(
        "/wallets/signatures", json=signature_body(seller_url=seller), headers=auth
    )
    assert pending.status_code == 403 and pending.json()["type"].endswith("/allow-pending")

    approvals = browser.get("/portal/approvals")
    host_path = seller.removeprefix("https://")
    assert host_path in approvals.text
    # Approving loosens the policy: without a fresh code nothing changes.
    no_code = browser.post(
        "/portal/approvals",
        data={"csrf": csrf_of(approvals), "seller": host_path, "decision": "allow"},
    )
    assert no_code.status_code == 401 and host_path in no_code.text
    clock.advance(30)
    decided = browser.post(
        "/portal/approvals",
        data={
            "csrf": csrf_of(approvals),
            "seller": host_path,
            "decision": "allow",
            "totp": code(holder.totp_secret, clock),
        },
    )
    assert 'id="no-pending"' in redirected(browser, decided, "/portal/approvals").text
    paid = browser.post("/wallets/signatures", json=signature_body(seller_url=seller), headers=auth)
    assert paid.status_code == 200, paid.text

    activity = browser.get("/portal/activity")
    assert activity.status_code == 200
    assert activity.text.count(host_path) >= 2 and "allow-pending" in activity.text
    assert '<td data-label="Decision">signed' in activity.text
    assert '<td data-label="Decision">refused' in activity.text
    home = browser.get("/portal/")
    assert 'id="spend"' in home.text and 'id="pending-count"' in home.text

    keys_page = browser.get("/portal/keys")
    assert (
        'id="active-key"' in keys_page.text
        and "never" not in keys_page.text.split('id="active-key"')[1].split("</tr>")[0]
    )
    revoked = browser.post("/portal/keys/revoke", data={"csrf": csrf_of(keys_page)})
    assert "Create a key" in redirected(browser, revoked, "/portal/keys").text
    after = browser.post(
        "/wallets/signatures", json=signature_body(seller_url=seller), headers=auth
    )
    assert after.status_code == 401


def test_an_api_key_cannot_reach_the_portal(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    issued = keys.issue_key(runtime.db, runtime.clock, email=holder.email, expires_in_days=30)
    page = signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    csrf = csrf_of(page)
    auth = {"Authorization": f"Bearer {issued.api_key}"}
    with httpx.Client(base_url=str(browser.base_url)) as agent:
        pages = ("/portal/", "/portal/keys", "/portal/approvals", "/portal/policy")
        for path in (*pages, "/portal/activity", "/portal/sign-in", "/portal/sign-up"):
            assert agent.get(path, headers=auth).status_code == 403
        for path in (
            "/portal/keys",
            "/portal/keys/revoke",
            "/portal/approvals",
            "/portal/sign-out",
        ):
            assert agent.post(path, headers=auth, data={"csrf": csrf}).status_code == 403
    # Even alongside a valid session cookie and CSRF token.
    assert browser.post("/portal/keys/revoke", headers=auth, data={"csrf": csrf}).status_code == 403
    assert 'id="active-key"' in browser.get("/portal/keys").text


def test_oversized_form_is_refused(browser: httpx.Client) -> None:
    csrf = csrf_of(browser.get("/portal/sign-in"))
    big = browser.post("/portal/sign-in", data={"csrf": csrf, "email": "a" * 20_000})
    assert big.status_code == 413
