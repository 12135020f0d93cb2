"""The job lease on SQLite and PostgreSQL: one holder among racers, renewal, take-over after
the holder stops renewing, release on a clean stop."""

from __future__ import annotations

import threading

from conftest import FrozenClock
from paysign.services.job_leases import JobLease, lease_holder
from paysign.store.database import Database

TTL = 30


def test_racers_for_a_free_lease_get_exactly_one_holder(db: Database, clock: FrozenClock) -> None:
    leases = [JobLease(db, clock, "reconcile", ttl=TTL, holder=f"p{i}") for i in range(8)]
    start = threading.Barrier(len(leases))
    won: list[str] = []

    def race(lease: JobLease) -> None:
        start.wait()
        if lease.hold():
            won.append(lease.holder)

    threads = [threading.Thread(target=race, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert lease_holder(db, clock, "reconcile") == won[0]


def test_separate_databases_race_too(database_url: str, clock: FrozenClock, db: Database) -> None:
    # Two processes' worth of pools on one database: the statement, not a lock in Python,
    # decides.
    other = Database(database_url)
    try:
        first = JobLease(db, clock, "reconcile", ttl=TTL, holder="a")
        second = JobLease(other, clock, "reconcile", ttl=TTL, holder="b")
        assert first.hold() is True
        assert second.hold() is False
        assert lease_holder(other, clock, "reconcile") == "a"
    finally:
        other.dispose()


def test_the_holder_renews_and_others_wait_until_it_expires(
    db: Database, clock: FrozenClock
) -> None:
    holder = JobLease(db, clock, "reconcile", ttl=TTL, holder="a")
    other = JobLease(db, clock, "reconcile", ttl=TTL, holder="b")
    assert holder.hold()
    for _ in range(5):  # renewed every third of the lease: held for longer than one TTL
        clock.advance(TTL // 3)
        assert holder.hold()
        assert not other.hold()

    # The holder dies: no more renewals. Until the lease expires nobody else gets it.
    clock.advance(TTL)
    assert not other.hold()
    assert lease_holder(db, clock, "reconcile") == "a"
    clock.advance(1)
    assert lease_holder(db, clock, "reconcile") is None
    assert other.hold()
    assert lease_holder(db, clock, "reconcile") == "b"
    # The old holder, back, finds it taken.
    assert not holder.hold()


def test_a_released_lease_is_taken_at_once(db: Database, clock: FrozenClock) -> None:
    holder = JobLease(db, clock, "reconcile", ttl=TTL, holder="a")
    other = JobLease(db, clock, "reconcile", ttl=TTL, holder="b")
    assert holder.hold()
    other.release()  # not the holder's: changes nothing
    assert not other.hold()
    holder.release()
    assert other.hold()


def test_leases_of_different_jobs_are_independent(db: Database, clock: FrozenClock) -> None:
    assert JobLease(db, clock, "reconcile", ttl=TTL, holder="a").hold()
    assert JobLease(db, clock, "cleanup", ttl=TTL, holder="b").hold()
