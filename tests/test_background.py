"""Periodic jobs run by the lease holder only, and taken over when it stops (SQLite and
PostgreSQL); the per-process pool sizes come from the settings."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from paysign.background import LeasedJob
from paysign.bootstrap import build_runtime
from paysign.clock import SystemClock
from paysign.config import Settings
from paysign.services.job_leases import JobLease, lease_holder
from paysign.store.database import Database
from paysign.store.signing_store import signing_store_for

WAIT = 30  # seconds; a bound for a hung test, not a timing assertion


class CountingLease(JobLease):
    """A real lease that also counts its answers."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.refused = 0
        self.asked = threading.Condition()

    def hold(self) -> bool:
        held = super().hold()
        with self.asked:
            self.refused += not held
            self.asked.notify_all()
        return held


class Counter:
    def __init__(self) -> None:
        self.runs = 0
        self.changed = threading.Condition()

    def __call__(self) -> None:
        with self.changed:
            self.runs += 1
            self.changed.notify_all()

    def wait_for(self, runs: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.runs >= runs, timeout=WAIT)


def test_only_the_holder_runs_the_job_and_another_takes_over(db: Database) -> None:
    clock = SystemClock()
    first_runs, second_runs = Counter(), Counter()
    first = LeasedJob(CountingLease(db, clock, "job", ttl=3, holder="first"), 0.05, first_runs)
    second_lease = CountingLease(db, clock, "job", ttl=3, holder="second")
    second = LeasedJob(second_lease, 0.05, second_runs)
    first.start()
    try:
        first_runs.wait_for(1)
        second.start()
        with second_lease.asked:  # asked twice and refused twice while the first holds it
            assert second_lease.asked.wait_for(lambda: second_lease.refused >= 2, timeout=WAIT)
        assert second_runs.runs == 0
        assert lease_holder(db, clock, "job") == "first"
    finally:
        first.stop()  # a clean stop gives the lease up: no need to wait for it to expire
    try:
        second_runs.wait_for(1)
        assert lease_holder(db, clock, "job") == "second"
    finally:
        second.stop()
    assert lease_holder(db, clock, "job") is None


def test_a_failing_run_is_logged_and_the_job_keeps_running(db: Database) -> None:
    calls = Counter()

    def failing() -> None:
        calls()
        raise RuntimeError("boom")

    job = LeasedJob(JobLease(db, SystemClock(), "job", ttl=3), 0.05, failing)
    job.start()
    try:
        calls.wait_for(3)
    finally:
        job.stop()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_pool_sizes_come_from_the_settings(database_url: str, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "var",
        database_url=database_url,
        database_pool_size=3,
        signing_connections=2,
    )
    runtime = build_runtime(settings)
    store = signing_store_for(runtime.db, connections=settings.signing_connections)
    try:
        assert runtime.db.writer.pool.size() == 3  # type: ignore[attr-defined]
        assert store.pool.max_size == 2  # type: ignore[attr-defined]
    finally:
        store.close()
        runtime.db.dispose()
