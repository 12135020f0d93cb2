"""A payer paid for a moment ago is paid again in one round trip (store/known_payers.py): a
guard checks their holder and rules are unchanged and the database refuses any total past a
cap, so no change by another writer is missed and no cap is passed; any doubt costs one read
with locks, and a cap refusal is only made on those."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import new_account
from paysign.errors import SpendCapExceeded
from paysign.policy.caps import DAY, windows_at
from paysign.policy.rules import candidate_hosts
from paysign.policy.seller import seller_location
from paysign.protocol import PreparedPayment
from paysign.services import policy
from paysign.services.keys import LAST_USED_RESOLUTION_SECONDS
from paysign.services.signing import SigningDeps, signing_committer
from paysign.store import schema
from paysign.store import signing_sql as sql
from paysign.store.postgres_statements import psycopg_style
from read_ahead_support import (
    HOLDER_CHANGES,
    another_process,  # noqa: F401 - the fixture `other`
    burst,
    pipeline_runs,  # noqa: F401 - the fixture `sent`
    prefetching_deps,
    set_caps,
    signed,
    spent_today,
    work,
)


@pytest.fixture
def deps(runtime: Any, signing_store: Any) -> SigningDeps:
    return prefetching_deps(runtime, signing_store)


# The rules read for work()'s seller are on every host that could match it.
SELLER_HOSTS = len(candidate_hosts(seller_location("https://api.example.com/weather")))
HOLDER_READ = psycopg_style(sql.fingerprinted_holder_sql(SELLER_HOSTS))
GUARD = psycopg_style(sql.GUARD_HOLDERS_UNCHANGED)


def is_one_round_trip(statements: list[str]) -> bool:
    """BEGIN, the holders' guard, the writes and COMMIT; no holder read."""
    return (
        statements[0] == "BEGIN"
        and statements[1] == GUARD
        and statements[-1] == "COMMIT"
        and HOLDER_READ not in statements
    )


def pay(deps: SigningDeps, account: dict[str, str], count: int = 1) -> list[object]:
    return burst(deps, account, count)


def assert_capped(
    outcomes: list[object], *, signed: int, cap: str, remaining: int
) -> list[SpendCapExceeded]:
    """``signed`` of ``outcomes`` signed, the others refused by ``cap`` quoting ``remaining``."""
    refusals = [o for o in outcomes if not isinstance(o, PreparedPayment)]
    assert len(outcomes) - len(refusals) == signed
    assert all(isinstance(o, SpendCapExceeded) for o in refusals), refusals
    capped = [o for o in refusals if isinstance(o, SpendCapExceeded)]
    assert [(o.extensions["cap"], o.extensions["remaining"]) for o in capped] == [
        (cap, remaining)
    ] * len(capped)
    return capped


def set_spent_today(runtime: Any, account: dict[str, str], spent: int) -> None:
    """What another writer did to the day's window, without this process seeing it."""
    day, _ = windows_at(runtime.clock.now())
    windows = schema.spend_windows
    with runtime.db.write() as conn:
        conn.execute(
            windows.update()
            .where(windows.c.account_id == account["account_id"])
            .where(windows.c.window == "daily")
            .where(windows.c.start == day.start)
            .values(spent=spent)
        )


def test_a_known_payer_is_paid_in_one_round_trip(
    deps: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    batches = deps.store.prefetching
    assert signed(pay(deps, account)) == 1
    assert len(sent) == 2 and HOLDER_READ in sent[0]  # read with locks, then written
    for count in range(2, 6):
        before = len(sent)
        assert signed(pay(deps, account)) == 1
        assert len(sent) == before + 1
        assert is_one_round_trip(sent[-1])
        assert batches.committed_on_known == count - 1
        assert spent_today(runtime, account) == count * 10_000
    assert batches.stale == 0 and batches.given_up == 0


def test_every_batch_of_a_known_payers_burst_is_one_round_trip(
    deps: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    assert signed(pay(deps, account)) == 1
    before = len(sent)
    assert signed(pay(deps, account, 8)) == 8
    assert all(is_one_round_trip(run) for run in sent[before:])
    assert spent_today(runtime, account) == 9 * 10_000


@pytest.mark.parametrize(("change", "refused_with"), HOLDER_CHANGES)
def test_a_change_by_another_writer_holds_from_the_next_payment(
    deps: SigningDeps, runtime: Any, change: Any, refused_with: type[Exception]
) -> None:
    account = new_account(runtime)
    batches = deps.store.prefetching
    assert signed(pay(deps, account)) == 1 and signed(pay(deps, account)) == 1
    known = batches.committed_on_known
    assert known == 1
    spent = spent_today(runtime, account)
    change(runtime, account)
    stale = batches.stale
    [outcome] = pay(deps, account)
    assert isinstance(outcome, refused_with), outcome
    assert batches.stale == stale + 1  # tried on what was known, then read again
    assert batches.committed_on_known == known
    assert all(isinstance(o, refused_with) for o in pay(deps, account, 3))
    assert spent_today(runtime, account) == spent


def test_a_rule_on_another_seller_does_not_make_the_payer_stale(
    deps: SigningDeps, runtime: Any
) -> None:
    account = new_account(runtime)
    batches = deps.store.prefetching
    assert signed(pay(deps, account)) == 1
    policy.decide_seller(
        runtime.db, runtime.clock, email=account["email"], seller="elsewhere.example", kind="deny"
    )
    assert signed(pay(deps, account)) == 1
    assert batches.stale == 0 and batches.committed_on_known == 1


def test_spending_by_another_process_never_passes_the_cap(
    deps: SigningDeps, other: SigningDeps, runtime: Any
) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, daily=95_000, monthly=None)
    batches = deps.store.prefetching
    assert signed(pay(deps, account)) == 1
    assert signed(pay(other, account, 5)) == 5  # unseen here: the totals known are low
    stale = batches.stale
    assert_capped(pay(deps, account, 6), signed=3, cap="daily", remaining=5_000)
    assert batches.stale > stale
    assert spent_today(runtime, account) == 90_000


def test_spend_written_by_another_writer_is_guarded_by_the_database(
    deps: SigningDeps, runtime: Any
) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, daily=45_000, monthly=None)
    batches = deps.store.prefetching
    assert signed(pay(deps, account)) == 1
    set_spent_today(runtime, account, 30_000)
    outcomes = pay(deps, account, 2)  # within the cap on the totals known: the database refuses
    assert_capped(outcomes, signed=1, cap="daily", remaining=5_000)
    assert batches.stale >= 1
    assert spent_today(runtime, account) == 40_000


def test_an_hourly_cap_holds_on_a_known_payer_against_another_process(
    deps: SigningDeps, other: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, hourly=55_000, daily=None, monthly=None)
    batches = deps.store.prefetching
    assert signed(pay(deps, account)) == 1 and signed(pay(deps, account)) == 1
    assert is_one_round_trip(sent[-1]) and batches.committed_on_known == 1
    assert signed(pay(other, account, 2)) == 2
    assert_capped(pay(deps, account, 3), signed=1, cap="hourly", remaining=5_000)
    assert batches.stale >= 1
    assert spent_today(runtime, account) == 50_000


def test_an_allow_rules_budget_holds_on_a_known_payer_against_another_process(
    deps: SigningDeps, other: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, daily=None, monthly=None)
    document = policy.get_policy(runtime.db, email=account["email"])
    document["allow"] = [{"seller": "api.example.com", "daily": 45_000}]
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)
    batches = deps.store.prefetching
    assert signed(pay(deps, account)) == 1 and signed(pay(deps, account)) == 1
    assert is_one_round_trip(sent[-1]) and batches.committed_on_known == 1
    assert signed(pay(other, account)) == 1
    [refusal] = assert_capped(pay(deps, account, 2), signed=1, cap="seller.daily", remaining=5_000)
    assert refusal.extensions["rule"] == "api.example.com"
    assert batches.stale >= 1
    assert spent_today(runtime, account) == 40_000


def test_a_cap_refusal_is_only_made_on_locked_reads(
    deps: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, daily=30_000, monthly=None)
    batches = deps.store.prefetching
    assert signed(pay(deps, account, 3)) == 3
    assert spent_today(runtime, account) == 30_000
    set_spent_today(runtime, account, 0)  # released by another process: known totals too high
    stale = batches.stale
    before = len(sent)
    assert signed(pay(deps, account)) == 1
    assert batches.stale == stale + 1
    assert any(HOLDER_READ in run for run in sent[before:])  # read again, with locks
    assert spent_today(runtime, account) == 10_000


def test_a_refusal_at_the_cap_on_locked_reads_is_exact(deps: SigningDeps, runtime: Any) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, daily=25_000, monthly=None)
    assert signed(pay(deps, account, 2)) == 2
    [refusal] = pay(deps, account)
    assert isinstance(refusal, SpendCapExceeded)
    assert refusal.extensions["remaining"] == 5_000
    assert spent_today(runtime, account) == 20_000


def test_two_stores_racing_on_one_known_payer_stop_at_the_cap(
    deps: SigningDeps, other: SigningDeps, runtime: Any
) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, daily=21 * 10_000, monthly=None)
    stores = [deps.store.prefetching, other.store.prefetching]
    assert signed(pay(deps, account)) == 1 and signed(pay(other, account)) == 1
    committers = [signing_committer(deps), signing_committer(other)]

    async def race() -> list[object]:
        return await asyncio.gather(
            *(committers[i % 2].run(work(d, account)) for i, d in enumerate([deps, other] * 15))
        )

    outcomes = asyncio.run(race())
    assert signed(outcomes) == 19
    assert all(
        isinstance(o, SpendCapExceeded) for o in outcomes if not isinstance(o, PreparedPayment)
    )
    assert spent_today(runtime, account) == 21 * 10_000
    assert sum(s.committed_on_known for s in stores) > 0
    assert sum(s.stale for s in stores) > 0  # one of them found the other's spending
    assert all(s.given_up == 0 for s in stores)


def touches(statements: list[str]) -> bool:
    return any("UPDATE api_keys" in s for s in statements)


def test_the_key_is_marked_used_once_per_resolution(
    deps: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    assert signed(pay(deps, account)) == 1
    assert touches(sent[-1])
    before = len(sent)
    for _ in range(3):
        runtime.clock.advance(LAST_USED_RESOLUTION_SECONDS // 4)
        assert signed(pay(deps, account)) == 1
    assert all(is_one_round_trip(run) for run in sent[before:])
    assert not any(touches(run) for run in sent[before:])
    runtime.clock.advance(LAST_USED_RESOLUTION_SECONDS // 4)
    before = len(sent)
    assert signed(pay(deps, account)) == 1
    [run] = sent[before:]
    assert is_one_round_trip(run) and touches(run)
    before = len(sent)
    assert signed(pay(deps, account)) == 1
    assert not any(touches(run) for run in sent[before:])


def test_the_next_day_is_read_again_and_starts_at_zero(
    deps: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    batches = deps.store.prefetching
    assert signed(pay(deps, account, 3)) == 3
    assert signed(pay(deps, account)) == 1
    assert batches.committed_on_known >= 1
    runtime.clock.advance(DAY)
    known = batches.committed_on_known
    before = len(sent)
    assert signed(pay(deps, account)) == 1
    assert batches.committed_on_known == known
    assert HOLDER_READ in sent[before]
    assert spent_today(runtime, account) == 10_000
    assert signed(pay(deps, account)) == 1
    assert batches.committed_on_known == known + 1
    assert spent_today(runtime, account) == 20_000
    assert batches.stale == 0


def test_a_payer_at_a_cap_is_read_with_locks_until_a_payment_passes(
    deps: SigningDeps, runtime: Any, sent: list[list[str]]
) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, daily=20_000, monthly=None)
    batches = deps.store.prefetching
    assert signed(pay(deps, account, 2)) == 2
    assert isinstance(pay(deps, account)[0], SpendCapExceeded)
    stale, before = batches.stale, len(sent)
    for _ in range(3):
        assert isinstance(pay(deps, account)[0], SpendCapExceeded)
    assert batches.stale == stale  # no more tries on the totals known: straight to locked reads
    assert all(HOLDER_READ in run for run in sent[before:] if run[0] == "BEGIN")
    set_spent_today(runtime, account, 0)  # given back (an authorization expired unsettled)
    assert signed(pay(deps, account)) == 1
    before = len(sent)
    assert signed(pay(deps, account)) == 1
    assert [is_one_round_trip(run) for run in sent[before:]] == [True]
    assert batches.stale == stale and spent_today(runtime, account) == 20_000
