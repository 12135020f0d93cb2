"""An allow rule's budget binds its seller in any letter case of the path, on SQLite and
PostgreSQL. Many servers read ``/PREMIUM`` as ``/premium``: with a broader allow rule beside
the budgeted one, an agent paid on past a 1 USDC budget by capitalising the path."""

from __future__ import annotations

import pytest
from test_policy_enforcement import USDC, set_policy, spent
from test_policy_enforcement import sign as sign  # the fixture

from paysign.errors import SellerDenied, SpendCapExceeded
from paysign.policy.caps import day_window

SPELLINGS = ["premium", "PREMIUM", "Premium", "pReMiUm", "%50remium"]


def test_a_budget_binds_every_letter_case_of_its_path(sign, runtime, account, clock) -> None:
    budget = {"seller": "shop.example.com/premium", "daily": USDC, "monthly": None}
    set_policy(runtime, account["email"], allow=[budget, "shop.example.com"])
    for path in SPELLINGS[:4]:
        sign(account, url=f"https://shop.example.com/{path}/report", amount=USDC // 4)
    for path in SPELLINGS:
        with pytest.raises(SpendCapExceeded) as capped:
            sign(account, url=f"https://shop.example.com/{path}/report", amount=USDC // 4)
        assert capped.value.extensions["rule"] == "shop.example.com/premium"
    # The rest of the host, outside the budget, is still paid.
    sign(account, url="https://shop.example.com/basic/report", amount=USDC)
    assert spent(runtime, account, day_window(clock.now())) == 2 * USDC


def test_a_budget_on_a_non_ascii_path_binds_its_other_cases(sign, runtime, account) -> None:
    budget = {"seller": "shop.example.com/café", "daily": USDC // 2, "monthly": None}
    set_policy(runtime, account["email"], allow=[budget, "shop.example.com"])
    sign(account, url="https://shop.example.com/CAF%C3%89/menu", amount=USDC // 2)
    with pytest.raises(SpendCapExceeded):
        sign(account, url="https://shop.example.com/caf%C3%A9/menu", amount=1)


@pytest.mark.parametrize(
    "url",
    [
        "https://shop.example.com/CAF%C3%89",  # É folds to é only outside ASCII
        "https://shop.example.com/caf%C3%89/x",
        "https://shop.example.com/ADM%C4%B0N",  # İ: "admin" to Java's equalsIgnoreCase
        "https://shop.example.com/adm%C4%B1n/users",  # the dotless i
    ],
)
def test_a_denied_path_in_non_ascii_letter_case_is_refused(sign, runtime, account, url) -> None:
    set_policy(
        runtime,
        account["email"],
        allow=["shop.example.com"],
        deny=["shop.example.com/café", "shop.example.com/admin"],
    )
    with pytest.raises(SellerDenied):
        sign(account, url=url)
