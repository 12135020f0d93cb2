"""A spend window counts at most the ledger's largest integer, on SQLite and PostgreSQL. With
every cap off (a policy the holder may choose), a payment of 2**63 - 1 base units filled the
month's window; on PostgreSQL every later payment was a 500 (bigint out of range) for the rest
of the month, and on SQLite the total silently became a float."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from test_policy_enforcement import set_policy
from test_policy_enforcement import sign as sign  # the fixture

from paysign.errors import SpendCapExceeded
from paysign.policy.caps import LEDGER_MAX, day_window, month_window
from paysign.store.schema import spend_windows

NO_CAPS = {"perPayment": None, "daily": None, "monthly": None}


def _totals(runtime, account) -> list[object]:
    with runtime.db.read() as conn:
        return list(
            conn.execute(
                sa.select(spend_windows.c.spent)
                .where(spend_windows.c.account_id == account["account_id"])
                .order_by(spend_windows.c.window)
            ).scalars()
        )


def test_a_window_past_the_ledgers_largest_integer_is_refused_not_overflowed(
    sign, runtime, account, clock
) -> None:
    set_policy(runtime, account["email"], caps=NO_CAPS)
    sign(account, amount=LEDGER_MAX - 5)
    sign(account, amount=5)  # exactly full
    for amount in (1, 5, LEDGER_MAX):
        with pytest.raises(SpendCapExceeded) as capped:
            sign(account, amount=amount)
        assert capped.value.extensions["cap"] in ("daily", "monthly")
    assert _totals(runtime, account) == [LEDGER_MAX, LEDGER_MAX]
    assert all(type(total) is int for total in _totals(runtime, account))


def test_the_month_is_bounded_when_only_the_day_has_a_cap(sign, runtime, account, clock) -> None:
    set_policy(runtime, account["email"], caps={**NO_CAPS, "daily": LEDGER_MAX})
    sign(account, amount=LEDGER_MAX)
    clock.advance(86_400)  # a new day, the same month (the frozen clock starts mid-month)
    assert day_window(clock.now()) != day_window(clock.now() - 86_400)
    assert month_window(clock.now()) == month_window(clock.now() - 86_400)
    with pytest.raises(SpendCapExceeded) as capped:
        sign(account, amount=1)
    assert capped.value.extensions["cap"] == "monthly"
