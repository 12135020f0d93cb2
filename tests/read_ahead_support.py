"""Payments through PostgreSQL's batches with their reads made ahead, for the tests of
store/signing_prefetch.py, store/signing_postgres_async.py and store/read_ahead_hints.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg import AsyncConnection

from conftest import signature_body
from paysign.bootstrap import Runtime
from paysign.errors import NotAuthenticated, SellerDenied, SpendCapExceeded, SpendingFrozen
from paysign.policy.caps import day_window
from paysign.protocol import PreparedPayment
from paysign.services import account_admin, keys, policy
from paysign.services.signing import (
    SigningDeps,
    SigningWork,
    by_api_key,
    signing_committer,
    signing_work,
)
from paysign.store import policy_repo, postgres_pipeline
from paysign.store.signing_store import SigningStore, signing_store_for


def prefetching_deps(runtime: Runtime, signing_store: SigningStore) -> SigningDeps:
    """The signing deps of a store whose batches read ahead (skips the test on SQLite)."""
    if signing_store.prefetching is None:
        pytest.skip("only PostgreSQL's batches run with their reads made ahead")
    return SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)


def work(deps: SigningDeps, account: dict[str, str], *, amount: int = 10_000) -> SigningWork:
    body = signature_body(amount=str(amount))
    return signing_work(deps, by_api_key(account["api_key"]), body, sandbox=False)


def set_caps(runtime: Runtime, account: dict[str, str], **caps: int | None) -> None:
    document = policy.get_policy(runtime.db, email=account["email"])
    document["caps"] = {"perPayment": None, **caps}
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)


def spent_today(runtime: Runtime, account: dict[str, str]) -> int:
    with runtime.db.read() as conn:
        return policy_repo.spent_in(conn, account["account_id"], day_window(runtime.clock.now()))


def burst(deps: SigningDeps, account: dict[str, str], count: int) -> list[object]:
    """``count`` payments of 10,000 sent together through one group committer."""
    committer = signing_committer(deps)

    async def together() -> list[object]:
        return await asyncio.gather(*(committer.run(work(deps, account)) for _ in range(count)))

    return asyncio.run(together())


def signed(outcomes: list[object]) -> int:
    return sum(isinstance(o, PreparedPayment) for o in outcomes)


async def waiting_for_locks(conn: AsyncConnection[Any], count: int) -> None:
    """Until ``count`` statements on the spend windows wait for a lock (a minute at most)."""
    for _ in range(600):
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE '%spend_windows%' AND datname = current_database()"
        )
        row = await cursor.fetchone()
        if row is not None and row[0] >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{count} statements never waited for the windows' locks")


@pytest.fixture(name="sent")
def pipeline_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The fixture ``sent`` (import this into a test module to have it): the statements of
    every pipeline run from now on, in order, one list per run."""
    runs: list[list[str]] = []
    run = postgres_pipeline.Pipeline.run

    async def recording(self: Any, commands: Any) -> Any:
        runs.append([command.query for command in commands])
        return await run(self, commands)

    monkeypatch.setattr(postgres_pipeline.Pipeline, "run", recording)
    return runs


@pytest.fixture(name="other")
def another_process(runtime: Runtime, deps: SigningDeps) -> Iterator[SigningDeps]:
    """The fixture ``other`` (import this into a test module that has ``deps``): the deps of
    a second signing store on the same database, as another process has."""
    store = signing_store_for(runtime.db)
    yield SigningDeps(store, runtime.vault, runtime.clock, runtime.registry)
    store.close()


#: Changes another writer makes to a payer's key, rules or policy, and what each payment of
#: theirs is refused with from then on: (change(runtime, account), the refusal's type).
HOLDER_CHANGES = [
    pytest.param(
        lambda runtime, account: policy.decide_seller(
            runtime.db,
            runtime.clock,
            email=account["email"],
            seller="api.example.com",
            kind="deny",
        ),
        SellerDenied,
        id="seller-denied",
    ),
    pytest.param(
        lambda runtime, account: set_caps(runtime, account, daily=5_000, monthly=None),
        SpendCapExceeded,
        id="daily-cap-lowered",
    ),
    pytest.param(
        lambda runtime, account: keys.revoke_key(runtime.db, runtime.clock, email=account["email"]),
        NotAuthenticated,
        id="key-revoked",
    ),
    pytest.param(
        lambda runtime, account: account_admin.disable_account(
            runtime.db, runtime.clock, email=account["email"]
        ),
        NotAuthenticated,
        id="account-disabled",
    ),
    pytest.param(
        lambda runtime, account: policy.freeze_spending(
            runtime.db, runtime.clock, email=account["email"], frozen=True
        ),
        SpendingFrozen,
        id="spending-frozen",
    ),
]
