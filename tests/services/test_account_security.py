"""Changing a signed-in account's password: the one password hasher, other sessions ended,
and the length checked before an authenticator code is spent."""

from __future__ import annotations

import pyotp
import pytest

from paysign.bootstrap import Runtime
from paysign.errors import InvalidAccountInput
from paysign.services import account_security, accounts, portal_sign_in
from paysign.services.portal_deps import portal_deps
from paysign.services.sign_in import TOTP_STEP

PASSWORD = "long enough pass"


def _code(secret: str, now: int, steps_ahead: int = 0) -> str:
    return pyotp.TOTP(secret, interval=TOTP_STEP).at(now + steps_ahead * TOTP_STEP)


def test_a_new_password_is_hashed_as_at_sign_up_and_ends_other_sessions(
    runtime: Runtime,
) -> None:
    deps = portal_deps(runtime)
    created = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email="ada@example.com", password=PASSWORD
    )
    now = runtime.clock.now()
    elsewhere = portal_sign_in.sign_in(
        deps, None, created.email, PASSWORD, _code(created.totp_secret, now, -1), "10.0.0.1"
    )
    here = portal_sign_in.sign_in(
        deps, None, created.email, PASSWORD, _code(created.totp_secret, now), "10.0.0.2"
    )

    ended = account_security.change_password(
        deps, here, PASSWORD, "another long pass", _code(created.totp_secret, now, 1)
    )

    assert (ended.sessions, ended.assistants) == (1, 0)
    account = accounts.require_account(runtime.db, created.email)
    assert account.password_hash.startswith("$argon2")
    assert accounts.verify_password(account, "another long pass")
    assert not accounts.verify_password(account, PASSWORD)
    assert deps.sessions.load(elsewhere.id) is None
    assert deps.sessions.load(here.id) is not None


def test_a_password_of_the_wrong_length_spends_no_code(runtime: Runtime) -> None:
    deps = portal_deps(runtime)
    created = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email="bob@example.com", password=PASSWORD
    )
    code = _code(created.totp_secret, runtime.clock.now())
    session = portal_sign_in.sign_in(deps, None, created.email, PASSWORD, code, "10.0.0.1")
    next_code = _code(created.totp_secret, runtime.clock.now(), 1)

    with pytest.raises(InvalidAccountInput):
        account_security.change_password(deps, session, PASSWORD, "short", next_code)

    ended = account_security.change_password(
        deps, session, PASSWORD, "another long pass", next_code
    )
    assert ended.sessions == 0
