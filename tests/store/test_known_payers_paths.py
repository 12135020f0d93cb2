"""A known payer's batch (store/known_payers.py) on PostgreSQL: what it counts in
``paysign_known_payer_batches_total``, which refusals it makes in its one round trip, and the
batches it still hands to the locked reads or to the threads."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import REGISTRY

from conftest import new_account, signature_body
from paysign.errors import AllowPending, SpendCapExceeded
from paysign.protocol import PreparedPayment
from paysign.services import policy
from paysign.services.signing import SigningDeps, by_api_key, signing_committer, signing_work
from read_ahead_support import burst, prefetching_deps, set_caps, spent_today, work

KNOWN = "paysign_known_payer_batches_total"


@pytest.fixture
def deps(runtime: Any, signing_store: Any) -> SigningDeps:
    return prefetching_deps(runtime, signing_store)


def counted(outcome: str) -> float:
    return REGISTRY.get_sample_value(KNOWN, {"outcome": outcome}) or 0.0


def test_the_metric_counts_one_round_trips_and_changed_payers(
    deps: SigningDeps, runtime: Any
) -> None:
    account = new_account(runtime)
    assert isinstance(burst(deps, account, 1)[0], PreparedPayment)  # read with locks
    one, changed = counted("one_round_trip"), counted("changed")
    for _ in range(2):
        assert isinstance(burst(deps, account, 1)[0], PreparedPayment)
    assert (counted("one_round_trip"), counted("changed")) == (one + 2, changed)
    policy.freeze_spending(runtime.db, runtime.clock, email=account["email"], frozen=True)
    burst(deps, account, 1)
    assert (counted("one_round_trip"), counted("changed")) == (one + 2, changed + 1)


def test_a_per_payment_refusal_is_made_in_the_one_round_trip(
    deps: SigningDeps, runtime: Any
) -> None:
    account = new_account(runtime)
    set_caps(runtime, account, perPayment=20_000, daily=None, monthly=None)
    batches = deps.store.prefetching
    assert isinstance(burst(deps, account, 1)[0], PreparedPayment)
    known, stale = batches.committed_on_known, batches.stale
    committer = signing_committer(deps)
    refused = asyncio.run(committer.run(work(deps, account, amount=30_000)))
    # It quotes the policy, not what the windows have spent: no locked read is needed.
    assert isinstance(refused, SpendCapExceeded) and refused.extensions["cap"] == "perPayment"
    assert (batches.committed_on_known, batches.stale) == (known + 1, stale)
    assert isinstance(burst(deps, account, 1)[0], PreparedPayment)
    assert batches.committed_on_known == known + 2
    assert spent_today(runtime, account) == 20_000


def test_a_known_payers_seller_waiting_for_approval_goes_to_the_threads(
    deps: SigningDeps, runtime: Any
) -> None:
    account = new_account(runtime)  # may pay api.example.com only: others wait for approval
    batches = deps.store.prefetching
    assert isinstance(burst(deps, account, 1)[0], PreparedPayment)
    given_up, stale = batches.given_up, batches.stale
    committer = signing_committer(deps)
    body = signature_body(seller_url="https://api.example.com/weather?city=paris")
    bodies = [body, signature_body(seller_url="https://elsewhere.example.net/v1")]

    async def together() -> list[object]:
        works = [
            signing_work(deps, by_api_key(account["api_key"]), b, sandbox=False) for b in bodies
        ]
        return await asyncio.gather(*(committer.run(w) for w in works))

    paid, pending = asyncio.run(together())
    assert isinstance(paid, PreparedPayment) and isinstance(pending, AllowPending)
    assert batches.given_up == given_up + 1  # the queue is read on the threads only
    assert batches.stale == stale  # two sellers' hosts: not what was remembered, read afresh
    assert spent_today(runtime, account) == 20_000


def test_a_known_sandbox_payer_is_paid_in_one_round_trip(deps: SigningDeps, runtime: Any) -> None:
    account = new_account(runtime)
    batches = deps.store.prefetching
    committer = signing_committer(deps)

    def sandbox() -> object:
        body = signature_body()
        sandboxed = signing_work(deps, by_api_key(account["api_key"]), body, sandbox=True)
        return asyncio.run(committer.run(sandboxed))

    assert isinstance(sandbox(), PreparedPayment)
    known = batches.committed_on_known
    assert isinstance(sandbox(), PreparedPayment)
    assert batches.committed_on_known == known + 1
    assert spent_today(runtime, account) == 0  # test funds: no cap, nothing reserved
