"""Payments through PostgreSQL's batches with their reads made ahead, for the tests of
store/signing_prefetch.py, store/signing_postgres_async.py and store/read_ahead_hints.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import signature_body
from paysign.bootstrap import Runtime
from paysign.policy.caps import day_window
from paysign.services import policy
from paysign.services.signing import (
    SigningDeps,
    SigningWork,
    by_api_key,
    signing_committer,
    signing_work,
)
from paysign.store import policy_repo, postgres_pipeline
from paysign.store.signing_store import SigningStore


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
