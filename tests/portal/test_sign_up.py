"""Sign-up limits: accounts per client address, and the email-taken answer counted as a failed
sign-in of the address, so the form is no cheaper a way to find accounts than sign-in."""

from __future__ import annotations

import re
import secrets

import httpx
import pytest
import sqlalchemy as sa

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.config import Settings
from paysign.portal.account_pages import EMAIL_UNAVAILABLE
from paysign.services import accounts
from paysign.services.sign_in import SIGN_UP_LIMITED
from paysign.store.schema import accounts as accounts_table
from portal.conftest import PASSWORD, code, csrf_of, error_of, sign_in

SIGN_UPS = 3
GUESS = "someone else's password"
FAILURES = 3


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "portal_max_sign_ups_per_address": SIGN_UPS,
            "oauth_max_failures_per_address": FAILURES,
        }
    )


def _sign_up(browser: httpx.Client, email: str, password: str = PASSWORD) -> httpx.Response:
    form = browser.get("/portal/sign-up")
    return browser.post(
        "/portal/sign-up", data={"csrf": csrf_of(form), "email": email, "password": password}
    )


def _count(runtime: Runtime) -> int:
    with runtime.db.read() as conn:
        counted = sa.select(sa.func.count()).select_from(accounts_table)
        return int(conn.execute(counted).scalar_one())


def _fresh_email() -> str:
    return f"new-{secrets.token_hex(4)}@example.com"


def test_accounts_per_address_are_limited(browser: httpx.Client, runtime: Runtime) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    short = _sign_up(browser, _fresh_email(), password="short")
    assert short.status_code == 400  # rejected input is not counted
    for _ in range(SIGN_UPS):
        assert _sign_up(browser, _fresh_email()).status_code == 200
    before = _count(runtime)
    limited = _sign_up(browser, _fresh_email())
    assert limited.status_code == 429
    assert error_of(limited) == SIGN_UP_LIMITED.format(
        minutes=runtime.settings.oauth_failure_window_seconds // 60
    )
    assert _count(runtime) == before
    clock.advance(runtime.settings.oauth_failure_window_seconds + 1)
    assert _sign_up(browser, _fresh_email()).status_code == 200


def test_a_taken_email_names_nobody_and_spends_the_address_budget(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    taken = _sign_up(browser, holder.email.upper(), password=GUESS)
    assert taken.status_code == 400
    assert error_of(taken) == EMAIL_UNAVAILABLE
    before = _count(runtime)
    # Each probe is a failed sign-in of the address: once they reach the address's limit,
    # neither form answers from there, not even to the right credentials.
    for _ in range(FAILURES - 1):
        clock.advance(1)
        assert _sign_up(browser, holder.email, password=GUESS).status_code == 400
    assert _sign_up(browser, _fresh_email()).status_code == 429
    assert _count(runtime) == before
    blocked = sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock))
    assert blocked.status_code == 429
    clock.advance(runtime.settings.oauth_failure_window_seconds + 1)
    assert (
        sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock)).status_code == 303
    )


def _secret(enrol: httpx.Response) -> str:
    found = re.search(r'id="totp-secret">([A-Z2-7 ]+)<', enrol.text)
    assert found, enrol.text
    return found.group(1).replace(" ", "")


def test_a_lost_secret_can_be_replaced_until_the_first_sign_in(
    browser: httpx.Client, runtime: Runtime
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    email = _fresh_email()
    first = _sign_up(browser, email)
    assert first.status_code == 200
    wallet = re.search(r"<code>(0x[0-9a-fA-F]{40})</code>", first.text)
    lost = _secret(first)

    wrong = _sign_up(browser, email, password="not the password at all")
    assert wrong.status_code == 400 and error_of(wrong) == EMAIL_UNAVAILABLE
    again = _sign_up(browser, email)
    assert again.status_code == 200
    replacement = _secret(again)
    assert replacement != lost
    assert wallet and wallet.group(0) in again.text  # the same account and wallet
    assert sign_in(browser, email, PASSWORD, code(lost, clock)).status_code == 401
    clock.advance(30)
    assert sign_in(browser, email, PASSWORD, code(replacement, clock)).status_code == 303

    # Enrolled now: the same request no longer hands out a secret.
    clock.advance(runtime.settings.oauth_failure_window_seconds + 1)  # a new sign-up budget
    with httpx.Client(base_url=str(browser.base_url)) as stranger:
        enrolled = _sign_up(stranger, email)
    assert enrolled.status_code == 400 and error_of(enrolled) == EMAIL_UNAVAILABLE
    assert "totp-secret" not in enrolled.text
