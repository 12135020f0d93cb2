"""SQLite's signing commits are flushed to the disk beside the event loop (store/wal_sync.py),
and nothing of a batch is answered before a flush that began after its commit has returned."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from conftest import signature_body
from paysign.protocol import PreparedPayment
from paysign.services.keys import hash_api_key
from paysign.services.signing import (
    SigningDeps,
    by_api_key,
    sign_payment_for,
    signing_committer,
    signing_work,
)
from paysign.store import repositories as repo
from paysign.store.signing_sqlite import SqliteSigningStore
from paysign.store.signing_store import SigningStore
from paysign.store.unavailable import database_unavailable
from paysign.store.wal_sync import WORKER_COMMAND, LogNotFlushed, WalSync
from paysign.store.wal_sync_worker import LogFile

#: A log-sync process that answers each byte it reads with ``ANSWER`` once ``GATE`` exists.
GATED_WORKER = """
import os, sys, time
gate, answer = os.environ["GATE"], os.environ["ANSWER"].encode()
os.write(1, b"\\x01")
while asked := os.read(0, 4096):
    while not os.path.exists(gate):
        time.sleep(0.005)
    os.write(1, answer * len(asked))
"""


@pytest.fixture
def database_path(runtime) -> str:
    if not runtime.db.is_sqlite:
        pytest.skip("SQLite's log; PostgreSQL's commit is on its disk when it returns")
    return runtime.db.url.removeprefix("sqlite:///")


@dataclass
class Rig:
    """A signing store whose log is flushed by ``sync``, and the group committer over it; the
    gated flusher answers once ``gate`` exists."""

    sync: WalSync
    store: SigningStore
    deps: SigningDeps
    committer: object
    gate: Path

    async def started(self, account) -> None:
        """Run a first batch (flushed on the loop while the process starts), then wait for it."""
        await asyncio.gather(*(self.committer.run(w) for w in self.works(account, 3)))
        await until(lambda: self.sync.ready)

    def works(self, account, n: int) -> list:
        body = signature_body(amount="10000")
        key = by_api_key(account["api_key"])
        return [signing_work(self.deps, key, body, sandbox=False) for _ in range(n)]

    def run(self, works: list) -> list[asyncio.Future]:
        return [asyncio.ensure_future(self.committer.run(w)) for w in works]


@pytest.fixture
def rig(runtime, database_path, tmp_path, monkeypatch) -> Iterator[Callable[..., Rig]]:
    """``rig(answer=".", **options)``: a rig whose flusher is the gated one, unless
    ``command`` says another."""
    stores: list[SigningStore] = []

    def make(answer: str = ".", **options) -> Rig:
        gate = tmp_path / "gate"
        monkeypatch.setenv("GATE", str(gate))
        monkeypatch.setenv("ANSWER", answer)
        options.setdefault("command", (sys.executable, "-c", GATED_WORKER))
        sync = WalSync(database_path, **options)
        store = SqliteSigningStore(database_path, log_sync=sync)
        stores.append(store)
        deps = SigningDeps(store, runtime.vault, runtime.clock, runtime.registry)
        return Rig(sync, store, deps, signing_committer(deps), gate)

    yield make
    for store in stores:
        store.close()


async def until(condition, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("timed out")


def signatures_of(runtime, account) -> list[repo.SignatureRecord]:
    with runtime.db.read() as conn:
        return repo.signatures_of(conn, account["account_id"])


def test_a_batch_is_answered_only_once_a_flush_after_its_commit_returns(
    runtime, account, rig
) -> None:
    r = rig()

    async def scenario() -> list[object]:
        await r.started(account)
        tasks = r.run(r.works(account, 6))
        await until(lambda: len(signatures_of(runtime, account)) == 9)  # committed ...
        await asyncio.sleep(0.1)
        assert not any(task.done() for task in tasks)  # ... and not answered before the flush
        r.gate.touch()
        return await asyncio.gather(*tasks)

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    assert r.sync.flushed_beside == 1  # the six shared one flush


def test_a_batch_whose_flush_fails_is_answered_unavailable(runtime, account, rig) -> None:
    r = rig(answer="!")
    r.gate.touch()

    async def scenario() -> list[object]:
        await r.started(account)
        return await asyncio.gather(*r.run(r.works(account, 4)), return_exceptions=True)

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, LogNotFlushed) for o in outcomes)
    assert all(database_unavailable(o) for o in outcomes)  # answered 503, Retry-After
    assert len(signatures_of(runtime, account)) == 7  # recorded, and never sent


def test_a_lost_process_owes_nothing_and_is_started_again(runtime, account, rig) -> None:
    r = rig()  # the gate never opens

    async def scenario() -> list[object]:
        await r.started(account)
        first = r.sync.pid
        tasks = r.run(r.works(account, 5))
        await until(lambda: len(signatures_of(runtime, account)) == 8)
        assert first is not None
        os.kill(first, 9)
        outcomes = await asyncio.gather(*tasks)  # flushed on the loop instead
        await r.started(account)
        assert r.sync.pid not in (None, first)
        return outcomes

    with capture_logs() as logs:
        outcomes = asyncio.run(scenario())
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    assert [e["owed"] for e in logs if e["event"] == "wal_sync_process_lost"] == [1]
    assert r.sync.started == 2


def test_a_stalled_process_is_stopped_and_what_it_owes_flushed_here(account, rig) -> None:
    r = rig(stall_seconds=0.3)  # the gate never opens

    async def scenario() -> list[object]:
        await r.started(account)
        return await asyncio.gather(*r.run(r.works(account, 4)))

    with capture_logs() as logs:
        outcomes = asyncio.run(scenario())
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    lost = [e for e in logs if e["event"] == "wal_sync_process_lost"]
    assert [(e["reason"], e["owed"]) for e in lost] == [("it answered nothing for 0.3 s", 1)]


def test_a_flusher_that_cannot_start_leaves_every_flush_to_the_loop(
    runtime, account, rig, tmp_path
) -> None:
    r = rig(command=(str(tmp_path / "no-such-program"),), max_restarts=1)

    async def scenario() -> list[object]:
        outcomes = []
        for _ in range(4):  # a batch each: each tries to start one, until the budget is spent
            outcomes += await asyncio.gather(*r.run(r.works(account, 3)))
        return outcomes

    with capture_logs() as logs:
        outcomes = asyncio.run(scenario())
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    assert len(signatures_of(runtime, account)) == 12
    events = [e["event"] for e in logs if e["event"].startswith("wal_sync_process")]
    assert events == ["wal_sync_process_not_started"] * 2 + ["wal_sync_process_given_up"]
    assert (r.sync.started, r.sync.flushed_beside) == (0, 0)


def test_a_batch_that_wrote_nothing_waits_for_the_flushes_before_it(runtime, account, rig) -> None:
    r = rig()
    stranger = {**account, "api_key": "psk_" + "x" * 40}  # refused, and nothing recorded

    async def scenario() -> list[object]:
        await r.started(account)
        paying = r.run(r.works(account, 3))
        await until(lambda: len(signatures_of(runtime, account)) == 6)
        refused = r.run(r.works(stranger, 2))
        await asyncio.sleep(0.1)
        assert not any(task.done() for task in paying + refused)
        r.gate.touch()
        return await asyncio.gather(*paying, *refused, return_exceptions=True)

    outcomes = asyncio.run(scenario())
    names = [type(o).__name__ for o in outcomes]
    assert names == ["PreparedPayment"] * 3 + ["NotAuthenticated"] * 2


def test_the_log_sync_process_flushes_batches_and_a_lone_request_is_flushed_at_once(
    runtime, account, rig
) -> None:
    r = rig(command=WORKER_COMMAND)

    async def scenario() -> list[object]:
        lone = [await r.committer.run(w) for w in r.works(account, 3)]
        assert r.sync.started == 0  # one at a time: flushed on the loop, no process needed
        await r.started(account)
        batch = await asyncio.gather(*r.run(r.works(account, 8)))
        return lone + batch

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, PreparedPayment) for o in outcomes)
    assert (r.sync.started, r.sync.flushed_beside) == (1, 1)
    assert len(signatures_of(runtime, account)) == 14


def test_a_commit_outside_a_batch_is_flushed_before_it_returns(
    runtime, account, database_path, tmp_path
) -> None:
    # A log that cannot be flushed (its directory does not exist) shows which commits try.
    unflushable = WalSync(str(tmp_path / "missing" / "paysign.db"))
    store = SqliteSigningStore(database_path, log_sync=unflushable)
    deps = SigningDeps(store, runtime.vault, runtime.clock, runtime.registry)
    try:
        with store.transaction() as tx:  # reads only: nothing to flush
            holder = tx.key_holder(hash_api_key(account["api_key"]), runtime.clock.now())
        assert holder is not None
        with pytest.raises(LogNotFlushed):
            sign_payment_for(deps, by_api_key(account["api_key"]), signature_body(), sandbox=False)
    finally:
        store.close()


def test_the_log_file_followed_to_a_new_file_at_its_path(tmp_path) -> None:
    path = tmp_path / "paysign.db-wal"
    log = LogFile(str(path))
    assert not log.sync()  # no log yet: nothing can be promised
    path.write_bytes(b"frames")
    assert log.sync()
    first = log.inode
    path.unlink()
    path.write_bytes(b"a new log")
    assert log.sync()
    assert log.inode not in (None, first)
    assert log.inode == (path.stat().st_dev, path.stat().st_ino)
    log.close()
