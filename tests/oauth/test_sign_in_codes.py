"""An authenticator code is six ASCII digits. Digits of another script (Arabic-Indic,
full-width) are a wrong code like any other: the same answer whether the password was right or
not, so the answer cannot confirm a stolen password without the second factor."""

from __future__ import annotations

import contextlib

import pytest

from conftest import in_other_digits

from .conftest import Service, User
from .test_oauth import _sign_in_page

OTHER_DIGITS = in_other_digits("123456")


@pytest.mark.parametrize("code", OTHER_DIGITS)
def test_a_code_in_other_digits_is_a_wrong_code(service: Service, user: User, code: str) -> None:
    browser, http, login, page = _sign_in_page(service, user)
    with contextlib.closing(http):
        right_password = browser.sign_in(http, login, page, code=code)
        wrong_password = browser.sign_in(http, login, page, password="not it at all", code=code)
    assert right_password.status_code == wrong_password.status_code == 401
    assert right_password.text == wrong_password.text
