"""An authenticator code is six ASCII digits. Digits of another script (Arabic-Indic,
full-width) are a wrong code like any other, at sign-in and at a step-up: never a 500 that
would tell a right password from a wrong one."""

from __future__ import annotations

import httpx
import pytest

from conftest import FrozenClock, in_other_digits
from paysign.bootstrap import Runtime
from paysign.services import accounts
from paysign.services.portal_deps import portal_deps
from paysign.services.sign_in import CredentialsRefused

from .conftest import PASSWORD, code, error_of, sign_in

OTHER_DIGITS = in_other_digits("123456")


@pytest.mark.parametrize("typed", OTHER_DIGITS)
def test_a_code_in_other_digits_is_a_wrong_code_at_sign_in(
    browser: httpx.Client, holder: accounts.CreatedAccount, typed: str
) -> None:
    right_password = sign_in(browser, holder.email, PASSWORD, typed)
    wrong_password = sign_in(browser, holder.email, "not the password", typed)
    assert right_password.status_code == wrong_password.status_code == 401
    assert error_of(right_password) == error_of(wrong_password)


def test_a_code_in_other_digits_is_a_wrong_code_at_a_step_up(
    runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    credentials = portal_deps(runtime).credentials
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    ascii_code = code(holder.totp_secret, clock)
    for typed in in_other_digits(ascii_code):
        with pytest.raises(CredentialsRefused):
            credentials.fresh_code(holder.account_id, typed)
    credentials.fresh_code(holder.account_id, ascii_code)  # the same code, typed in 0-9
