"""A payer's reads ahead leave out the hour's window and the budgets' once their last batch
found them unneeded (store/read_ahead_hints.py); a hint gone stale costs one batch on the
threads and never lets a cap pass."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from conftest import new_account
from paysign.errors import SpendCapExceeded
from paysign.policy.decide import Grant, PolicySettings
from paysign.policy.rules import Rule
from paysign.policy.seller_budgets import SellerBudget
from paysign.protocol import PreparedPayment
from paysign.services import policy
from paysign.services.signing import SigningDeps
from paysign.store import read_ahead_hints as hints_module
from paysign.store.read_ahead_hints import ReadAheadHints
from paysign.store.repositories import KeyHolder
from paysign.store.signing_prefetch import PayerReads, PlannedRead
from read_ahead_support import (
    burst,
    pipeline_runs,  # noqa: F401 - the fixture `sent`
    prefetching_deps,
    set_caps,
)

PLAN = PlannedRead(b"k1", 1, ("api.example.com",), None)


def found(plan: PlannedRead, *, hourly: int | None, grants: list[Grant]) -> PayerReads:
    defaults = PolicySettings.defaults()
    settings = replace(defaults, caps=replace(defaults.caps, hourly=hourly))
    holder = KeyHolder("key-1", "acct-1", "wallet-1", "0x" + "11" * 20, b"s", None, settings)
    return PayerReads(plan, holder, grants, None)


# --- the hints ---


def test_an_unknown_payer_reads_everything() -> None:
    [plan] = ReadAheadHints().apply([PLAN])
    assert plan.hour and plan.budgets


def test_a_payer_without_an_hourly_cap_or_budget_reads_neither_next_time() -> None:
    hints = ReadAheadHints()
    allow = Grant("allow", Rule("api.example.com", "/"))
    hints.learn([found(PLAN, hourly=None, grants=[allow])])
    [plan] = hints.apply([PLAN])
    assert not plan.hour and not plan.budgets


def test_an_hourly_cap_and_a_budget_are_read_next_time() -> None:
    hints = ReadAheadHints()
    budgeted = Grant("allow", Rule("api.example.com", "/"), SellerBudget(daily=5))
    hints.learn([found(PLAN, hourly=100, grants=[budgeted])])
    [plan] = hints.apply([PLAN])
    assert plan.hour and plan.budgets


def test_budgets_are_hinted_per_hosts_and_forgetting_reads_everything_again() -> None:
    hints = ReadAheadHints()
    hints.learn([found(PLAN, hourly=None, grants=[])])
    elsewhere = PlannedRead(b"k1", 1, ("other.example.com",), None)
    [known, other] = hints.apply([PLAN, elsewhere])
    assert not known.budgets and other.budgets  # no rule read yet on the other host
    assert not other.hour  # the hourly cap is the payer's, whatever the host
    hints.forget([PLAN])
    [plan] = hints.apply([PLAN])
    assert plan.hour and plan.budgets


def test_past_the_limit_every_payer_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hints_module, "MAX_REMEMBERED", 2)
    hints = ReadAheadHints()
    plans = [PlannedRead(bytes([i]), 1, ("a.example",), None) for i in range(4)]
    for plan in plans:
        hints.learn([found(plan, hourly=None, grants=[])])
    assert [p.hour for p in hints.apply(plans)] == [True, True, True, False]


# --- on PostgreSQL ---


@pytest.fixture
def deps(runtime: Any, signing_store: Any) -> SigningDeps:
    return prefetching_deps(runtime, signing_store)


def reads_of(runs: list[list[str]]) -> list[list[str]]:
    return [statements for statements in runs if statements[0] == "BEGIN"]


def locks_hour(statements: list[str]) -> bool:
    return any("'hourly'" in s and "cap_hourly" in s for s in statements)


def locks_budgets(statements: list[str]) -> bool:
    return any("seller_spend_windows" in s for s in statements)


def test_a_payer_with_neither_reads_only_their_day_and_month_after_one_batch(
    deps: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    for _ in range(3):
        assert all(isinstance(o, PreparedPayment) for o in burst(deps, account, 1))
    first, *later = reads_of(sent)
    assert locks_hour(first) and locks_budgets(first)
    assert later and not any(locks_hour(r) or locks_budgets(r) for r in later)
    assert all(any("'daily'" in s and "'monthly'" in s for s in r) for r in later)


def test_an_hourly_cap_set_after_the_hint_holds_from_the_next_payment(
    deps: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    assert all(isinstance(o, PreparedPayment) for o in burst(deps, account, 5))
    set_caps(runtime, account, hourly=8 * 10_000, daily=None, monthly=None)
    given_up = deps.store.prefetching.given_up
    outcomes = burst(deps, account, 12)
    # An hour is counted from when it has a cap: the 5 before are not in it.
    assert sum(isinstance(o, PreparedPayment) for o in outcomes) == 8
    assert all(
        isinstance(o, SpendCapExceeded) and o.extensions["cap"] == "hourly"
        for o in outcomes
        if not isinstance(o, PreparedPayment)
    )
    assert deps.store.prefetching.given_up > given_up  # the stale hint: to the threads
    # ...and the hint is learned again: the next batches lock the hour ahead.
    given_up = deps.store.prefetching.given_up
    assert not any(isinstance(o, PreparedPayment) for o in burst(deps, account, 4))
    assert deps.store.prefetching.given_up == given_up
    assert locks_hour(reads_of(sent)[-1])


def test_a_budget_added_after_the_hint_holds_from_the_next_payment(
    deps: SigningDeps, runtime: Any
) -> None:
    account = new_account(runtime)
    assert all(isinstance(o, PreparedPayment) for o in burst(deps, account, 5))
    document = policy.get_policy(runtime.db, email=account["email"])
    document["allow"] = [{"seller": "api.example.com", "daily": 8 * 10_000}]
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)
    outcomes = burst(deps, account, 12)
    assert sum(isinstance(o, PreparedPayment) for o in outcomes) == 8  # the budget is new
    assert all(
        isinstance(o, SpendCapExceeded) for o in outcomes if not isinstance(o, PreparedPayment)
    )
    given_up = deps.store.prefetching.given_up
    assert not any(isinstance(o, PreparedPayment) for o in burst(deps, account, 4))
    assert deps.store.prefetching.given_up == given_up
