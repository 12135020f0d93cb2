"""The signing batches run on the event loop (``store/signing_postgres_async.py``) behind a real
PgBouncer in transaction pooling mode (``pgbouncer_support``).

Such a batch keeps its server connection across two round trips and the work between them:
``BEGIN`` and the reads, ended by a Sync inside the open transaction; then the writes (many
signatures at once in a big batch) and ``COMMIT``. Two signing stores (as two processes would)
share PgBouncer's two server connections. With ``database_transaction_pooler`` set, every
batch commits there, none goes to the threads, and payments and caps count exactly. Without
it, the statements prepared on a server connection by one client collide with the next
client's there, and batches are given up to the threads: the control that shows the setting
matters on this path too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from prometheus_client import REGISTRY

from conftest import new_account, signature_body
from paysign.bootstrap import Runtime
from paysign.errors import SpendCapExceeded
from paysign.protocol import SignedPayment
from paysign.services import policy
from paysign.services.signing import SigningDeps, SigningQueue, by_api_key
from paysign.store.signing_batch import FirstRead
from paysign.store.signing_postgres_async import TwoPhaseBatches
from paysign.store.signing_store import signing_store_for
from pgbouncer_support import pgbouncer as pgbouncer  # the fixture
from pgbouncer_support import runtime_behind, signed_and_spent

AMOUNT = 1_000
#: Signing stores, each with its group committer and its connections: two processes' worth.
STORES = 2
#: Payments submitted together, then again: batches of many requests each.
BURST, BURSTS = 120, 3


@dataclass
class Bursts:
    answers: list[object]  # each payment's SignedPayment, or what it raised
    committed: int  # batches committed on the event loop
    given_up: int  # batches given up there (then run on the threads)
    failures: list[BaseException]  # what the given-up batches raised
    metric: dict[str, float]  # batches by path, as paysign_group_commit_batches_total counts
    big: float  # batches of more than 4 requests (many signatures written at once)


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _counters() -> dict[str, float]:
    batches = "paysign_group_commit_batches_total"
    sizes = "paysign_group_commit_batch_size"
    return {
        "read_ahead": _sample(batches, path="read_ahead"),
        "threads": _sample(batches, path="threads"),
        "big": _sample(f"{sizes}_count") - _sample(f"{sizes}_bucket", le="4.0"),
    }


def _recording_failures(
    batches: TwoPhaseBatches, monkeypatch: pytest.MonkeyPatch
) -> list[BaseException]:
    """What each batch given up on the event loop raised (the log keeps its type only)."""
    failures: list[BaseException] = []
    run = batches.run

    async def recorded(reads: Sequence[FirstRead], batch: Callable[..., object]) -> object:
        try:
            return await run(reads, batch)
        except Exception as exc:
            failures.append(exc)
            raise

    monkeypatch.setattr(batches, "run", recorded)
    return failures


def _pay_in_bursts(
    runtime: Runtime, api_keys: Sequence[str], monkeypatch: pytest.MonkeyPatch, *, bursts: int
) -> Bursts:
    """``bursts`` times ``BURST`` live payments submitted together on one event loop, spread
    over ``STORES`` signing queues and over the accounts of ``api_keys``."""
    stores = [signing_store_for(runtime.db) for _ in range(STORES)]
    try:
        reading_ahead = [
            s.prefetching for s in stores if isinstance(s.prefetching, TwoPhaseBatches)
        ]
        assert len(reading_ahead) == STORES, "no batches on the event loop here"
        recorded = [_recording_failures(p, monkeypatch) for p in reading_ahead]
        queues = [
            SigningQueue(SigningDeps(store, runtime.vault, runtime.clock, runtime.registry))
            for store in stores
        ]
        body = signature_body(network="eip155:8453", amount=str(AMOUNT))

        async def scenario() -> list[object]:
            answers: list[object] = []
            for _ in range(bursts):
                answers += await asyncio.gather(
                    *(
                        queues[i % STORES].sign(
                            by_api_key(api_keys[i % len(api_keys)]), body, sandbox=False
                        )
                        for i in range(BURST)
                    ),
                    return_exceptions=True,
                )
            return answers

        before = _counters()
        answers = asyncio.run(scenario())
        after = _counters()
    finally:
        for store in stores:
            store.close()
    return Bursts(
        answers,
        committed=sum(p.committed for p in reading_ahead),
        given_up=sum(p.given_up for p in reading_ahead),
        failures=[failure for failures in recorded for failure in failures],
        metric={path: after[path] - before[path] for path in ("read_ahead", "threads")},
        big=after["big"] - before["big"],
    )


def _all_on_the_event_loop(run: Bursts) -> None:
    assert run.failures == []
    assert run.given_up == 0
    assert run.committed > 0
    assert run.metric == {"read_ahead": run.committed, "threads": 0}


@pytest.mark.parametrize("accounts", [1, 8], ids=["one-account", "eight-accounts"])
def test_bursts_sign_and_count_exactly_on_the_event_loop(
    pgbouncer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, accounts: int
) -> None:
    runtime = runtime_behind(pgbouncer, tmp_path, pooler=True)
    try:
        payers = [new_account(runtime) for _ in range(accounts)]
        run = _pay_in_bursts(runtime, [p["api_key"] for p in payers], monkeypatch, bursts=BURSTS)
        assert [a for a in run.answers if not isinstance(a, SignedPayment)] == []
        _all_on_the_event_loop(run)
        assert run.big > 0
        each = BURST * BURSTS // accounts
        for payer in payers:
            spent = {"daily": each * AMOUNT, "monthly": each * AMOUNT}
            assert signed_and_spent(runtime.db, payer["account_id"]) == (each, spent)
    finally:
        runtime.db.dispose()


def test_a_daily_cap_admits_exactly_its_payments_on_the_event_loop(
    pgbouncer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admitted = BURST // 3
    runtime = runtime_behind(pgbouncer, tmp_path, pooler=True)
    try:
        payer = new_account(runtime)
        document = policy.get_policy(runtime.db, email=payer["email"])
        document["caps"] = {"perPayment": None, "daily": admitted * AMOUNT, "monthly": None}
        policy.set_policy(runtime.db, runtime.clock, email=payer["email"], document=document)
        run = _pay_in_bursts(runtime, [payer["api_key"]], monkeypatch, bursts=1)
        signed = [a for a in run.answers if isinstance(a, SignedPayment)]
        refused = [a for a in run.answers if not isinstance(a, SignedPayment)]
        assert len(signed) == admitted
        assert len(refused) == BURST - admitted
        assert all(isinstance(a, SpendCapExceeded) for a in refused), refused[:3]
        assert {a.extensions["cap"] for a in refused if isinstance(a, SpendCapExceeded)} == {
            "daily"
        }
        _all_on_the_event_loop(run)
        at_cap = {"daily": admitted * AMOUNT, "monthly": admitted * AMOUNT}
        assert signed_and_spent(runtime.db, payer["account_id"]) == (admitted, at_cap)
    finally:
        runtime.db.dispose()


def test_without_the_setting_the_event_loop_batches_collide_and_are_given_up(
    pgbouncer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = runtime_behind(pgbouncer, tmp_path, pooler=False)
    try:
        api_keys = [new_account(runtime)["api_key"] for _ in range(8)]
        # A process that ran before: what it prepared stays on the server connections.
        _pay_in_bursts(runtime, api_keys, monkeypatch, bursts=1)
        run = _pay_in_bursts(runtime, api_keys, monkeypatch, bursts=BURSTS)
        assert run.failures, "no batch failed: this test no longer tells the setting's effect"
        assert all(isinstance(f, psycopg.Error) for f in run.failures), run.failures
        # "… already exists", or another client's statement of the same name, run instead.
        assert all("prepared statement" in str(f) for f in run.failures), run.failures
        assert run.given_up == len(run.failures)
        assert run.metric["threads"] >= run.given_up  # each given up ran again there
    finally:
        runtime.db.dispose()
