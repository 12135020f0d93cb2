"""The sign-in and sign-up forms' sessions (SQLite and PostgreSQL): nothing stored until a
holder signs in, and their CSRF token still bound to the cookie's id and its hour."""

from __future__ import annotations

import httpx
import sqlalchemy as sa

from conftest import FrozenClock, LiveServer
from paysign.bootstrap import Runtime
from paysign.services import accounts
from paysign.services.sessions import ANONYMOUS_TTL
from paysign.store.schema import portal_sessions
from portal.conftest import COOKIE, PASSWORD, code, csrf_of, error_of, signed_in


def stored_sessions(runtime: Runtime) -> int:
    with runtime.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(portal_sessions)).scalar())


def test_cookieless_visits_to_the_forms_store_nothing(
    browser: httpx.Client, runtime: Runtime
) -> None:
    # Each of these was a write transaction and a row kept for an hour: anyone could grow the
    # database and hold its one write lock away from the payments, a request at a time.
    for _ in range(60):
        for page in ("/portal/sign-in", "/portal/sign-up"):
            answer = httpx.get(browser.base_url.join(page))
            assert answer.status_code == 200 and csrf_of(answer)
            assert answer.cookies[COOKIE]
    assert stored_sessions(runtime) == 0


def test_a_form_signs_in_with_its_own_token_only(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    browser.get("/portal/sign-in")
    other_form = httpx.get(browser.base_url.join("/portal/sign-in"))  # another browser's
    assert other_form.cookies[COOKIE] != browser.cookies[COOKIE]
    fields = {"email": holder.email, "password": PASSWORD}

    for wrong in (csrf_of(other_form), "", browser.cookies[COOKIE]):
        refused = browser.post("/portal/sign-in", data={**fields, "csrf": wrong, "totp": "000000"})
        assert refused.status_code == 403 and "expired" in error_of(refused)

    # The refusal's page is a new form, in a new session: its token signs in.
    totp = code(holder.totp_secret, runtime.clock)
    signed = browser.post(
        "/portal/sign-in", data={**fields, "csrf": csrf_of(refused), "totp": totp}
    )
    assert signed.status_code == 303 and browser.get("/portal/").status_code == 200
    assert stored_sessions(runtime) == 1  # the signed-in one


def test_a_form_expires_after_its_hour_and_a_made_up_id_is_no_session(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    assert isinstance(runtime.clock, FrozenClock)
    form = browser.get("/portal/sign-in")
    runtime.clock.advance(ANONYMOUS_TTL)
    totp = code(holder.totp_secret, runtime.clock)
    fields = {"email": holder.email, "password": PASSWORD, "totp": totp, "csrf": csrf_of(form)}
    expired = browser.post("/portal/sign-in", data=fields)
    assert expired.status_code == 403 and "expired" in error_of(expired)

    now = runtime.clock.now()
    for made_up in (
        f"anon.{now + 3600}.{'a' * 43}",  # begun in the future
        f"anon.{now}.{'a' * 42}",
        f"anon.{now}.{'a' * 42};",
        f"anon.-{now}.{'a' * 43}",
    ):
        page = httpx.get(browser.base_url.join("/portal/sign-in"), cookies={COOKIE: made_up})
        assert page.cookies[COOKIE] != made_up  # a new one was given
    assert stored_sessions(runtime) == 0


def test_a_sign_in_drops_the_sessions_that_have_ended(
    server: LiveServer, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    assert isinstance(runtime.clock, FrozenClock)
    with httpx.Client(base_url=server.url) as first, httpx.Client(base_url=server.url) as second:
        signed_in(first, holder, runtime.clock)
        assert stored_sessions(runtime) == 1
        runtime.clock.advance(runtime.settings.portal_session_idle_seconds + 31)  # a new code
        signed_in(second, holder, runtime.clock)
        assert stored_sessions(runtime) == 1  # the idle one went with this sign-in
        assert first.get("/portal/").status_code == 303


def test_signing_out_of_a_form_session_ends_nothing_stored(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    signed_in(browser, holder, runtime.clock)
    form = httpx.get(browser.base_url.join("/portal/sign-in"))  # another browser, not signed in
    out = httpx.post(
        browser.base_url.join("/portal/sign-out"),
        data={"csrf": csrf_of(form)},
        cookies={COOKIE: form.cookies[COOKIE]},
    )
    assert out.status_code == 303 and out.headers["location"] == "/portal/sign-in"
    assert stored_sessions(runtime) == 1  # the holder's, untouched
    assert browser.get("/portal/").status_code == 200
