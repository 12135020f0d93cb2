"""The failure limits of the credential check under attack, on SQLite and PostgreSQL: guesses
sent at once, guesses through sign-up's re-enrolment, and guesses spread over an IPv6 /64.
Each limit holds exactly: past it, even the right credentials are refused until the window
ends."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyotp
import pytest

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.config import Settings
from paysign.errors import AccountAlreadyExists
from paysign.services import accounts, portal_sign_in
from paysign.services.portal_deps import PortalDeps, portal_deps
from paysign.services.sign_in import TOTP_STEP, CredentialsRefused

PASSWORD = "the holder's long password"
PER_ACCOUNT = 5
PER_ADDRESS = 20


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "oauth_max_failures_per_account": PER_ACCOUNT,
            "oauth_max_failures_per_address": PER_ADDRESS,
            "portal_max_sign_ups_per_address": 1_000,
        }
    )


@pytest.fixture
def deps(runtime: Runtime) -> PortalDeps:
    return portal_deps(runtime)


@pytest.fixture
def holder(runtime: Runtime) -> accounts.CreatedAccount:
    """An account made by the operator, whose holder never signed in to the portal."""
    return accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email="holder@example.com", password=PASSWORD
    )


def code(secret: str, clock: FrozenClock) -> str:
    return pyotp.TOTP(secret, interval=TOTP_STEP).at(clock.now())


def outcome(attempt) -> str:  # type: ignore[no-untyped-def]
    try:
        attempt()
    except CredentialsRefused as refused:
        return "limited" if refused.rate_limited else "refused"
    except AccountAlreadyExists:
        return "refused"
    return "accepted"


def test_guesses_sent_at_once_are_checked_no_more_than_the_limit(
    deps: PortalDeps, holder: accounts.CreatedAccount, runtime: Runtime
) -> None:
    guesses = 24

    def guess(n: int) -> str:
        return outcome(
            lambda: portal_sign_in.sign_in(
                deps, None, holder.email, f"guess {n}", "000000", f"198.51.100.{n}"
            )
        )

    with ThreadPoolExecutor(guesses) as pool:
        outcomes = list(pool.map(guess, range(guesses)))
    assert outcomes.count("refused") == PER_ACCOUNT
    assert outcomes.count("limited") == guesses - PER_ACCOUNT
    right = code(holder.totp_secret, runtime.clock)  # type: ignore[arg-type]
    assert (
        outcome(
            lambda: portal_sign_in.sign_in(deps, None, holder.email, PASSWORD, right, "192.0.2.9")
        )
        == "limited"
    )


def test_step_up_codes_sent_at_once_are_checked_no_more_than_the_limit(
    deps: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    guesses = 16

    def guess(n: int) -> str:
        return outcome(lambda: deps.credentials.fresh_code(holder.account_id, f"{n:06d}"))

    with ThreadPoolExecutor(guesses) as pool:
        outcomes = list(pool.map(guess, range(guesses)))
    assert (outcomes.count("refused"), outcomes.count("limited")) == (
        PER_ACCOUNT,
        guesses - PER_ACCOUNT,
    )


def test_password_guesses_through_re_enrolment_count_against_the_account(
    deps: PortalDeps, holder: accounts.CreatedAccount, runtime: Runtime
) -> None:
    """Sign-up replaces a never-used authenticator given the right password: guessing that
    password there, from many addresses, spends the account's budget like sign-in does, and
    once it is spent the right password replaces nothing."""
    for n in range(PER_ACCOUNT):
        assert (
            outcome(
                lambda n=n: portal_sign_in.sign_up(
                    deps, holder.email, f"a long guess number {n}", f"203.0.113.{n}"
                )
            )
            == "refused"
        )
    taken_over = outcome(
        lambda: portal_sign_in.sign_up(deps, holder.email, PASSWORD, "203.0.113.200")
    )
    assert taken_over == "limited"
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    clock.advance(runtime.settings.oauth_failure_window_seconds + TOTP_STEP)
    # The operator's secret still opens the account: nothing was replaced.
    right = code(holder.totp_secret, clock)
    signed_in = portal_sign_in.sign_in(deps, None, holder.email, PASSWORD, right, "192.0.2.1")
    assert signed_in is not None


def test_sign_in_failures_from_one_ipv6_network_share_its_limit(
    deps: PortalDeps, runtime: Runtime
) -> None:
    emails = [f"nobody-{n}@example.com" for n in range(PER_ADDRESS + 3)]
    outcomes = [
        outcome(
            lambda n=n, email=email: portal_sign_in.sign_in(
                deps, None, email, "a guess", "000000", f"2001:db8:0:7::{n + 1:x}"
            )
        )
        for n, email in enumerate(emails)
    ]
    assert outcomes == ["refused"] * PER_ADDRESS + ["limited"] * 3
    # Another /64 has its own budget.
    other = outcome(
        lambda: portal_sign_in.sign_in(deps, None, emails[0], "a guess", "0", "2001:db8:0:8::1")
    )
    assert other == "refused"
