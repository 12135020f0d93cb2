"""What ``KnownPayers`` remembers of a batch's payers, and when a payer must be read again
(store/known_payers.py); on PostgreSQL: test_known_payers_postgres.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from paysign.policy.caps import DAY, HOUR, Caps, hour_window, windows_at
from paysign.policy.decide import Grant, PolicySettings
from paysign.policy.rules import Rule
from paysign.policy.seller_budgets import SellerBudget
from paysign.store import known_payers as known_payers_module
from paysign.store.known_payers import KnownPayers
from paysign.store.repositories import KeyHolder
from paysign.store.signing_batch import HourTotal, SellerTotal, SpendTotal
from paysign.store.signing_prefetch import PayerReads, PlannedRead, PrefetchedStatements

# 14:13 UTC on a day in mid-month: the next hour and the next day fall in the same month.
NOW = 1_790_000_000
HOSTS = ("api.example.com",)
RULE = Rule("api.example.com", "/")
CAPS = Caps(per_payment=None, daily=1_000, monthly=10_000)


def plan_at(now: int, key_hash: bytes = b"k1") -> PlannedRead:
    return PlannedRead(key_hash, now, HOSTS, windows_at(now))


def holder_of(*, hourly: int | None = None, last_used_at: int | None = None) -> KeyHolder:
    defaults = PolicySettings.defaults()
    settings = replace(defaults, caps=replace(CAPS, hourly=hourly))
    address = "0x" + "11" * 20
    return KeyHolder("key-1", "acct-1", "wallet-1", address, b"s", last_used_at, settings)


def read(
    plan: PlannedRead,
    holder: KeyHolder,
    grants: list[Grant] | None = None,
    *,
    spent: tuple[int, int] = (100, 200),
    hour_spent: int | None = None,
    budgets_spent: dict[Rule, tuple[int, int]] | None = None,
) -> PrefetchedStatements:
    """The statements of a batch that ran on locked reads of ``plan``'s payer."""
    reads = PayerReads(
        plan,
        holder,
        [Grant("allow", RULE)] if grants is None else grants,
        spent,
        hour_spent,
        budgets_spent,
        fingerprint=b"digest-1",
    )
    return PrefetchedStatements([reads])


# --- what is remembered ---


def test_an_unknown_payer_is_read() -> None:
    assert KnownPayers().reads_for([plan_at(NOW)]) is None


def test_a_known_payer_is_what_was_read_with_what_the_batch_added() -> None:
    plan = plan_at(NOW)
    day, month = plan.windows or windows_at(NOW)
    statements = read(plan, holder_of())
    statements.add_spends([SpendTotal("acct-1", day, month, CAPS, 30)])
    statements.add_spends([SpendTotal("acct-1", day, month, CAPS, 20)])
    statements.touch_keys([("key-1", NOW)])
    known = KnownPayers()
    known.remember(statements)
    [reads] = known.reads_for([plan]) or []
    assert reads.spent == (150, 250)
    assert reads.holder is not None and reads.holder.last_used_at == NOW
    assert reads.fingerprint == b"digest-1"
    assert reads.grants == [Grant("allow", RULE)]
    assert not reads.plan.hour and not reads.plan.budgets  # nothing more to read


def test_a_later_batch_adds_to_what_is_known() -> None:
    plan = plan_at(NOW)
    day, month = plan.windows or windows_at(NOW)
    known = KnownPayers()
    known.remember(read(plan, holder_of()))
    [reads] = known.reads_for([plan]) or []
    later = PrefetchedStatements([reads])
    later.add_spends([SpendTotal("acct-1", day, month, CAPS, 7)])
    known.remember(later)
    [reads] = known.reads_for([plan]) or []
    assert reads.spent == (107, 207)


def test_another_day_is_read() -> None:
    known = KnownPayers()
    known.remember(read(plan_at(NOW), holder_of()))
    assert known.reads_for([plan_at(NOW)]) is not None
    assert known.reads_for([plan_at(NOW + DAY)]) is None


def test_spend_added_in_another_day_leaves_the_windows_unknown() -> None:
    plan = plan_at(NOW)
    tomorrow, month = windows_at(NOW + DAY)
    statements = read(plan, holder_of())
    statements.add_spends([SpendTotal("acct-1", tomorrow, month, CAPS, 30)])
    known = KnownPayers()
    known.remember(statements)
    assert known.reads_for([plan]) is None


def test_an_hourly_capped_payer_is_known_in_their_hour_only() -> None:
    plan = plan_at(NOW)
    statements = read(plan, holder_of(hourly=500), hour_spent=40)
    statements.add_hour_spend(HourTotal("acct-1", hour_window(NOW), 500, 10))
    known = KnownPayers()
    known.remember(statements)
    [reads] = known.reads_for([plan]) or []
    assert reads.hour_spent == 50 and reads.plan.hour
    assert known.reads_for([plan_at(NOW + HOUR)]) is None


def test_an_hourly_capped_payer_whose_hour_was_not_read_is_read() -> None:
    known = KnownPayers()
    known.remember(read(plan_at(NOW), holder_of(hourly=500)))
    assert known.reads_for([plan_at(NOW)]) is None


def test_a_budget_is_known_once_read_and_counts_what_was_added() -> None:
    plan = plan_at(NOW)
    day, month = plan.windows or windows_at(NOW)
    budget = SellerBudget(daily=300)
    budgeted = [Grant("allow", RULE, budget)]
    never_read = KnownPayers()
    never_read.remember(read(plan, holder_of(), budgeted))
    assert never_read.reads_for([plan]) is None
    statements = read(plan, holder_of(), budgeted, budgets_spent={RULE: (60, 70)})
    statements.add_seller_spend(SellerTotal("acct-1", RULE, day, month, budget, 5))
    known = KnownPayers()
    known.remember(statements)
    [reads] = known.reads_for([plan]) or []
    assert reads.budgets_spent == {RULE: (65, 75)} and reads.plan.budgets


def test_a_forgotten_payer_is_read() -> None:
    known = KnownPayers()
    known.remember(read(plan_at(NOW), holder_of()))
    known.forget([plan_at(NOW)])
    assert known.reads_for([plan_at(NOW)]) is None


def test_one_unknown_payer_makes_the_whole_batch_read() -> None:
    known = KnownPayers()
    known.remember(read(plan_at(NOW), holder_of()))
    assert known.reads_for([plan_at(NOW), plan_at(NOW, b"k2")]) is None


def test_past_the_limit_every_payer_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(known_payers_module, "MAX_REMEMBERED", 2)
    known = KnownPayers()
    plans = [plan_at(NOW, bytes([i])) for i in range(4)]
    for plan in plans:
        known.remember(read(plan, holder_of()))
    assert [known.reads_for([p]) is not None for p in plans] == [False, False, False, True]
