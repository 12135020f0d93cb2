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


# --- how often the lease is written: simulated time, no sleeping ------------------------------


class SimulatedTime:
    """One timeline for both clocks a leased job reads: the loop's monotonic seconds and the
    lease's wall clock (whole seconds), moved only by the test."""

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self.current = start

    def monotonic(self) -> float:
        return self.current

    def now(self) -> int:
        return int(self.current)


class WriteCountingLease(JobLease):
    """A real lease recording when each of its writes happened and what it answered."""

    def __init__(self, time_source: SimulatedTime, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.time = time_source
        self.writes: list[tuple[float, bool]] = []

    def hold(self) -> bool:
        held = super().hold()
        self.writes.append((self.time.current, held))
        return held

    def last_granted(self) -> float:
        return max(at for at, held in self.writes if held)


def simulate(time_source: SimulatedTime, jobs: list[LeasedJob], until: float) -> None:
    """Run the jobs' loops (``step``, then sleep as told) on simulated time, each wake in
    order, until ``until``."""
    wakes = {id(job): time_source.current for job in jobs}
    while True:
        job = min(jobs, key=lambda j: wakes[id(j)])
        if wakes[id(job)] > until:
            return
        time_source.current = max(time_source.current, wakes[id(job)])
        wakes[id(job)] = time_source.current + job.step()


def test_a_frequent_job_writes_its_lease_once_a_third_of_its_lifetime(db: Database) -> None:
    # The notifier's shape: a run every 2 s, a 30 s lease.
    time_source = SimulatedTime()
    lease = WriteCountingLease(time_source, db, time_source, "notify", ttl=30, holder="p1")
    lease_at_each_run: list[float] = []

    def run() -> None:
        lease_at_each_run.append(time_source.current - lease.last_granted())

    job = LeasedJob(lease, 2.0, run, monotonic=time_source.monotonic)
    start = time_source.current
    simulate(time_source, [job], until=start + 300)

    assert len(lease_at_each_run) == 150  # the job kept its interval: every 2 s for 300 s
    written_at = [at - start for at, _ in lease.writes]
    assert written_at == [float(t) for t in range(0, 301, 10)]  # not 150 writes: 31
    assert all(held for _, held in lease.writes)
    # Every run starts with at least two thirds of the lease ahead of it.
    assert max(lease_at_each_run) < 10
    assert lease_holder(db, time_source, "notify") == "p1"


def test_a_process_without_the_lease_asks_for_it_once_a_third_and_takes_it_over(
    db: Database,
) -> None:
    time_source = SimulatedTime()
    first_runs, second_runs = Counter(), Counter()
    first_lease = WriteCountingLease(time_source, db, time_source, "notify", ttl=30, holder="a")
    second_lease = WriteCountingLease(time_source, db, time_source, "notify", ttl=30, holder="b")
    first = LeasedJob(first_lease, 2.0, first_runs, monotonic=time_source.monotonic)
    second = LeasedJob(second_lease, 2.0, second_runs, monotonic=time_source.monotonic)
    start = time_source.current
    simulate(time_source, [first, second], until=start + 100)
    assert (first.held, second.held, second_runs.runs) == (True, False, 0)
    assert first_runs.runs == 50
    # The waiting process asked every 10 s, not every 2 s, and was refused each time.
    assert [at - start for at, _ in second_lease.writes] == [float(t) for t in range(0, 101, 10)]
    assert not any(held for _, held in second_lease.writes)

    # The holder dies (its loop stops, nothing is released): the other takes over once the
    # lease has expired, within a third of its lifetime more, and runs the job.
    died_renewed_at = first_lease.last_granted()
    simulate(time_source, [second], until=died_renewed_at + 30 + 10 + 2)
    assert second.held
    taken_at = second_lease.last_granted()
    assert died_renewed_at + 30 < taken_at <= died_renewed_at + 30 + 10
    assert second_runs.runs >= 1
    assert lease_holder(db, time_source, "notify") == "b"


def test_a_run_longer_than_the_lease_keeps_it(db: Database) -> None:
    # Real time, a 3 s lease (renewed every second): the run goes on until the lease was
    # renewed three times under it, past its lifetime, and another process is refused then.
    clock = SystemClock()
    writes = Counter()

    class WriteNotifyingLease(CountingLease):
        def hold(self) -> bool:
            held = super().hold()
            writes()
            return held

    lease = WriteNotifyingLease(db, clock, "job", ttl=3, holder="runner")
    rival = JobLease(db, clock, "job", ttl=3, holder="rival")
    seen: dict[str, object] = {}
    finished = threading.Event()

    def long_run() -> None:
        if finished.is_set():
            return  # only the first run is long
        before = writes.runs
        writes.wait_for(before + 3)
        seen["renewed under the run"] = writes.runs - before >= 3
        seen["rival took it"] = rival.hold()
        seen["holder"] = lease_holder(db, clock, "job")
        finished.set()

    job = LeasedJob(lease, 0.05, long_run)
    job.start()
    try:
        assert finished.wait(timeout=WAIT)
    finally:
        job.stop()
    assert seen == {"renewed under the run": True, "rival took it": False, "holder": "runner"}
    assert lease.refused == 0
