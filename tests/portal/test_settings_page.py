"""Settings: changing the password needs the current one and a fresh code, and signs out the
other sessions; "sign out all other sessions" does what it says."""

from __future__ import annotations

import re

import httpx

from conftest import FrozenClock, LiveServer
from paysign.bootstrap import Runtime
from paysign.services import accounts
from portal.conftest import PASSWORD, code, csrf_of, redirected, secret_of, sign_in

NEW_PASSWORD = "a much better passphrase"


def test_change_password_and_end_other_sessions(
    server: LiveServer, browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    with httpx.Client(base_url=server.url) as laptop:
        used = code(holder.totp_secret, clock)
        assert sign_in(laptop, holder.email, PASSWORD, used).status_code == 303
        clock.advance(30)
        assert (
            sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock)).status_code
            == 303
        )
        page = browser.get("/portal/settings")
        assert page.status_code == 200
        csrf = csrf_of(page)
        form = {"csrf": csrf, "current": PASSWORD, "new": NEW_PASSWORD}

        clock.advance(30)
        fresh = code(holder.totp_secret, clock)
        wrong = browser.post(
            "/portal/settings/password", data={**form, "current": "not it at all", "totp": fresh}
        )
        assert wrong.status_code == 401
        short = browser.post(
            "/portal/settings/password", data={**form, "new": "short", "totp": fresh}
        )
        assert short.status_code == 400
        assert laptop.get("/portal/").status_code == 200  # nothing changed yet

        changed = browser.post("/portal/settings/password", data={**form, "totp": fresh})
        assert "1 other session" in redirected(browser, changed, "/portal/settings").text
        assert laptop.get("/portal/").status_code == 303  # signed out
        assert browser.get("/portal/").status_code == 200  # this one stays

        clock.advance(30)
        now = code(holder.totp_secret, clock)
        assert sign_in(laptop, holder.email, PASSWORD, now).status_code == 401
        clock.advance(30)
        now = code(holder.totp_secret, clock)
        assert sign_in(laptop, holder.email, NEW_PASSWORD, now).status_code == 303

        ended = browser.post("/portal/settings/sessions", data={"csrf": csrf})
        assert "1 other session" in redirected(browser, ended, "/portal/settings").text
        assert laptop.get("/portal/").status_code == 303
        assert browser.post("/portal/settings/sessions", data={"csrf": "x"}).status_code == 403


def test_reset_the_authenticator(
    server: LiveServer, browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    used = code(holder.totp_secret, clock)
    assert sign_in(browser, holder.email, PASSWORD, used).status_code == 303
    csrf = csrf_of(browser.get("/portal/settings"))
    start = {"csrf": csrf, "current": PASSWORD, "totp": used}
    assert browser.post("/portal/settings/authenticator", data=start).status_code == 401
    clock.advance(30)
    fresh = code(holder.totp_secret, clock)
    wrong_password = {**start, "current": "not the password", "totp": fresh}
    assert browser.post("/portal/settings/authenticator", data=wrong_password).status_code == 401
    page = browser.post("/portal/settings/authenticator", data={**start, "totp": fresh})
    assert page.status_code == 200, page.text
    secret = secret_of(page)
    token = re.search(r'name="token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    assert secret != holder.totp_secret

    confirm = {"csrf": csrf, "token": token}
    clock.advance(30)
    old_code = code(holder.totp_secret, clock)
    assert (
        browser.post(
            "/portal/settings/authenticator/confirm", data={**confirm, "totp": old_code}
        ).status_code
        == 400
    )
    forged = {**confirm, "token": token[:-8] + "AAAAAAA=", "totp": code(secret, clock)}
    assert browser.post("/portal/settings/authenticator/confirm", data=forged).status_code == 400
    # The token belongs to this session: another session of the account cannot use it.
    with httpx.Client(base_url=server.url) as other:
        assert sign_in(other, holder.email, PASSWORD, old_code).status_code == 303
        other_csrf = csrf_of(other.get("/portal/settings"))
        stolen = {"csrf": other_csrf, "token": token, "totp": code(secret, clock)}
        assert other.post("/portal/settings/authenticator/confirm", data=stolen).status_code == 400
        done = browser.post(
            "/portal/settings/authenticator/confirm", data={**confirm, "totp": code(secret, clock)}
        )
        assert "1 other session" in redirected(browser, done, "/portal/settings").text
        assert other.get("/portal/").status_code == 303

    clock.advance(30)
    with httpx.Client(base_url=server.url) as later:
        assert (
            sign_in(later, holder.email, PASSWORD, code(holder.totp_secret, clock)).status_code
            == 401
        )
        assert sign_in(later, holder.email, PASSWORD, code(secret, clock)).status_code == 303
