"""A signature's row records the extra spend windows it reserved in (the hour's, budgeted allow
rules'), written by the signing path's own INSERT; an expired one gives back exactly there,
whatever the policy became since. Rows without the record keep the conservative rule. Both
databases.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from reconcile_support import TESTNET, USDC, FakeChain
from reconcile_support import sign as sign  # the fixture

from paysign.policy.caps import day_window, hour_window, month_window
from paysign.policy.rules import Rule
from paysign.services import policy
from paysign.services.reconcile import reconcile
from paysign.store import policy_repo
from paysign.store.schema import signatures

BUDGETED = Rule("api.example.com", "/weather")  # the seller signature_body pays
BUDGET = {"seller": "api.example.com/weather", "daily": 3 * USDC, "monthly": 5 * USDC}
HOURLY = {"perPayment": None, "hourly": 5 * USDC, "daily": 10 * USDC, "monthly": 50 * USDC}


def save_policy(runtime, account, **changes) -> None:
    doc = policy.get_policy(runtime.db, email=account["email"])
    doc.update(changes)
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=doc)


def recorded(runtime, account) -> list[str | None]:
    with runtime.db.read() as conn:
        return list(
            conn.execute(
                sa.select(signatures.c.reserved_in)
                .where(signatures.c.account_id == account["account_id"])
                .order_by(signatures.c.id)
            ).scalars()
        )


def spent(runtime, account, window, rule: Rule | None = None) -> int:
    with runtime.db.read() as conn:
        if rule is None:
            return policy_repo.spent_in(conn, account["account_id"], window)
        return policy_repo.seller_spent_in(conn, account["account_id"], rule, window)


def test_the_row_records_the_windows_it_reserved_in(sign, runtime, account, clock) -> None:
    sign(account, amount=USDC)  # default policy: the day and month only
    sign(account, amount=USDC, sandbox=True)  # test funds: no window at all
    save_policy(runtime, account, caps=HOURLY, allow=[BUDGET, "api.example.com/other"])
    clock.advance(1)
    sign(account, amount=USDC)
    hour = hour_window(clock.now())
    assert recorded(runtime, account) == ["-", "-", f"{hour.start} api.example.com/weather"]


@pytest.mark.parametrize("edit", ["saved again", "caps and budget removed"])
def test_an_expired_signature_releases_the_hour_and_the_budget_after_a_policy_edit(
    sign, runtime, account, clock, edit
) -> None:
    save_policy(runtime, account, caps=HOURLY, allow=[BUDGET])
    clock.advance(1)
    sign(account, amount=USDC)  # never settled
    sign(account, amount=USDC, max_timeout=3600)  # still valid when the pass runs: counted
    hour, day, month = hour_window(clock.now()), day_window(clock.now()), month_window(clock.now())
    clock.advance(1)
    if edit == "saved again":
        save_policy(runtime, account)  # every rule rewritten, the settings' time moved on
    else:
        caps = {"perPayment": None, "daily": 10 * USDC, "monthly": 50 * USDC}
        save_policy(runtime, account, caps=caps, allow=["api.example.com/weather"])

    clock.advance(60 + 120)
    report = reconcile(runtime.db, clock, FakeChain({TESTNET}), grace_seconds=120)
    assert (report.expired, report.released) == (1, USDC)
    assert spent(runtime, account, hour) == USDC  # the still-valid one
    assert spent(runtime, account, day) == USDC
    assert spent(runtime, account, day, BUDGETED) == USDC
    assert spent(runtime, account, month, BUDGETED) == USDC


def test_a_row_without_the_record_keeps_the_conservative_rule(
    sign, runtime, account, clock
) -> None:
    # A signature from before the record was kept: after the policy was saved again, whether
    # the hour and the budget counted it is not certain, so they keep the amount.
    save_policy(runtime, account, caps=HOURLY, allow=[BUDGET])
    clock.advance(1)
    sign(account, amount=USDC)
    with runtime.db.write() as conn:
        conn.execute(signatures.update().values(reserved_in=None))
    hour, day = hour_window(clock.now()), day_window(clock.now())
    clock.advance(1)
    save_policy(runtime, account)

    clock.advance(60 + 120)
    report = reconcile(runtime.db, clock, FakeChain({TESTNET}), grace_seconds=120)
    assert (report.expired, report.released) == (1, USDC)
    assert spent(runtime, account, day) == 0
    assert spent(runtime, account, hour) == USDC
    assert spent(runtime, account, day, BUDGETED) == USDC
