"""paysign behind a real PgBouncer in transaction pooling mode (``pgbouncer_support``), its
payments each in a transaction of its own on a thread (the batches run on the event loop:
``test_pgbouncer_read_ahead``).

Two server connections serve every client connection of the test, one transaction at a time:
whatever a client left on a server connection (a prepared statement, a session setting) meets
another client's next transaction there. With ``database_transaction_pooler`` set, payments sign
and are counted exactly; without it, psycopg's prepared statements collide on the shared
server connections — the control that shows this test can tell the two apart.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import sqlalchemy as sa

from conftest import FrozenClock, new_account, signature_body
from paysign.bootstrap import Runtime
from paysign.errors import PaysignError
from paysign.services.job_leases import JobLease, lease_holder
from paysign.services.signing import SigningDeps, by_api_key, sign_payment_for
from paysign.store.signing_store import signing_store_for
from pgbouncer_support import pgbouncer as pgbouncer  # the fixture
from pgbouncer_support import runtime_behind, signed_and_spent

PAYMENTS = 160
AMOUNT = 1_000


def _pay_concurrently(runtime: Runtime, api_key: str) -> list[object]:
    """PAYMENTS live payments from 16 threads, each through the signing store's own pool and
    the engine's (the catalog's tier lookups): what the requests of a busy server do."""
    store = signing_store_for(runtime.db)
    deps = SigningDeps(store, runtime.vault, runtime.clock, runtime.registry)
    body = signature_body(network="eip155:8453", amount=str(AMOUNT))

    def pay(_: int) -> object:
        try:
            return sign_payment_for(deps, by_api_key(api_key), body, sandbox=False)
        except (PaysignError, psycopg.Error, sa.exc.DBAPIError) as exc:
            return exc

    try:
        with ThreadPoolExecutor(16) as threads:
            return list(threads.map(pay, range(PAYMENTS)))
    finally:
        store.close()


def test_payments_sign_and_count_exactly_behind_pgbouncer(pgbouncer: str, tmp_path: Path) -> None:
    runtime = runtime_behind(pgbouncer, tmp_path, pooler=True)
    try:
        created = new_account(runtime)
        account_id, api_key = created["account_id"], created["api_key"]
        answers = _pay_concurrently(runtime, api_key)
        failures = [a for a in answers if isinstance(a, Exception)]
        assert failures == []
        total = {"daily": PAYMENTS * AMOUNT, "monthly": PAYMENTS * AMOUNT}
        assert signed_and_spent(runtime.db, account_id) == (PAYMENTS, total)
    finally:
        runtime.db.dispose()


def test_without_the_setting_prepared_statements_collide_on_shared_connections(
    pgbouncer: str, tmp_path: Path
) -> None:
    runtime = runtime_behind(pgbouncer, tmp_path, pooler=False)
    try:
        api_key = new_account(runtime)["api_key"]
        answers = _pay_concurrently(runtime, api_key)
        failures = [a for a in answers if isinstance(a, Exception)]
        assert failures, "every payment signed: this test no longer tells the setting's effect"
        assert any("prepared statement" in str(f) for f in failures)
    finally:
        runtime.db.dispose()


def test_one_holder_of_a_job_lease_behind_pgbouncer(pgbouncer: str, tmp_path: Path) -> None:
    """The lease is a row, not a session's advisory lock: through shared server connections,
    racers still see exactly one holder, and take over only once it expired."""
    runtime = runtime_behind(pgbouncer, tmp_path, pooler=True)
    clock = FrozenClock()
    leases = [JobLease(runtime.db, clock, "reconcile", ttl=30) for _ in range(8)]
    try:
        with ThreadPoolExecutor(8) as threads:
            held = list(threads.map(lambda lease: lease.hold(), leases))
        assert held.count(True) == 1
        holder = leases[held.index(True)]
        assert lease_holder(runtime.db, clock, "reconcile") == holder.holder
        clock.advance(31)  # the holder died: it renewed no more
        successor = next(lease for lease in leases if lease is not holder)
        assert successor.hold()
        assert not holder.hold()
    finally:
        runtime.db.dispose()
