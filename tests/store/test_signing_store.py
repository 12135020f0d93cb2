"""The signing stores themselves (store/signing_sqlite.py, signing_postgres.py): the signature
rows they write, on SQLite and PostgreSQL, and the PostgreSQL store's connections outliving
what the server does to them."""

from __future__ import annotations

import dataclasses
import time
from functools import partial

import pytest
import sqlalchemy as sa
from psycopg_pool import PoolTimeout

from conftest import free_port, new_account, signature_body
from paysign.policy.caps import Caps, day_window, month_window
from paysign.protocol import SignedPayment
from paysign.services.keys import hash_api_key
from paysign.services.signing import SigningDeps, sign_payment
from paysign.store import repositories as repo
from paysign.store.database import Database
from paysign.store.schema import signatures
from paysign.store.signing_batch import ReadAhead, ReservationLost, SpendTotal
from paysign.store.signing_postgres import DatabaseUnreachable, PostgresSigningStore
from paysign.store.signing_store import SigningStore

NOW = 1_790_000_000
DAY, MONTH = day_window(NOW), month_window(NOW)


def test_the_signature_columns_are_the_records_fields_and_the_tables() -> None:
    fields = {field.name for field in dataclasses.fields(repo.SignatureRecord)}
    assert set(repo.SIGNATURE_COLUMNS) == fields
    assert set(repo.SIGNATURE_COLUMNS) == {column.name for column in signatures.columns} - {"id"}


def record(account_id: str, n: int) -> repo.SignatureRecord:
    return repo.SignatureRecord(
        account_id=account_id,
        api_key_id=None,
        seller_host=f"seller-{n}.example",
        seller_path=f"/item/{n}",
        network="eip155:84532",
        asset="0x" + "11" * 20,
        pay_to="0x" + "22" * 20,
        amount=1_000 + n,
        nonce=bytes([n]) * 32,
        valid_before=NOW + 60 + n,
        sandbox=n % 2 == 0,
        x402_version=1 + n % 2,
        created_at=NOW + n,
        tier=None if n == 0 else "OPEN_ECOSYSTEM",
        rule=None if n == 0 else f"seller-{n}.example",
        status="signed" if n < 3 else "settled",
        reserved_in=None if n == 0 else f"{NOW - NOW % 3600} seller-{n}.example/item",
    )


def test_signatures_are_read_back_as_they_were_written(runtime, signing_store, account) -> None:
    account_id = account["account_id"]
    alone, *batch = [record(account_id, n) for n in range(5)]
    with signing_store.transaction() as tx:  # one row: a plain INSERT
        tx.insert_signature(alone)
    with signing_store.transaction() as tx:  # several: executemany, or COPY on PostgreSQL
        for each in batch:
            tx.insert_signature(each)
    with runtime.db.read() as conn:
        assert repo.signatures_of(conn, account_id) == [alone, *batch]


def spent(runtime, account_id: str) -> dict[str, int]:
    with runtime.db.read() as conn:
        rows = conn.execute(
            sa.text('SELECT "window", spent FROM spend_windows WHERE account_id = :a'),
            {"a": account_id},
        )
        return {name: int(value) for name, value in rows}


def test_the_database_refuses_a_total_past_a_cap_that_memory_let_through(
    runtime, signing_store, account
) -> None:
    """The batch's in-memory check is exact; the database's own guard is there in case it is
    not. Asked for a total past the cap, the store adds nothing and the transaction fails —
    on PostgreSQL at the commit, since the pipeline does not wait for the update's row count."""
    account_id, caps = account["account_id"], Caps(per_payment=None, daily=100, monthly=1_000)
    with pytest.raises(ReservationLost), signing_store.transaction() as tx:
        assert tx.reserve(account_id, 60, DAY, MONTH, caps) is None
        tx.insert_signature(record(account_id, 1))
        past_the_cap = SpendTotal(account_id, DAY, MONTH, caps, 41)
        if not tx._sql.add_spends([past_the_cap]):  # SQLite says so at once
            raise ReservationLost("refused at once")
    assert spent(runtime, account_id) == {}
    with runtime.db.read() as conn:
        assert repo.signatures_of(conn, account_id) == []
    with signing_store.transaction() as tx:  # and the store still works
        assert tx.reserve(account_id, 100, DAY, MONTH, caps) is None
    assert spent(runtime, account_id) == {"daily": 100, "monthly": 100}


@pytest.mark.parametrize(
    ("caps", "refused_by"),
    [
        (Caps(per_payment=None, daily=100, monthly=1_000), "daily"),
        (Caps(per_payment=None, daily=0, monthly=1_000), "daily"),
        (Caps(per_payment=None, daily=None, monthly=100), "monthly"),
    ],
)
def test_the_first_payment_of_a_window_is_held_to_its_cap(
    runtime, signing_store, account, caps, refused_by
) -> None:
    """No row yet for the day or the month: the payment that would create it is checked
    against the cap all the same, and what a refused one leaves spent is nothing."""
    account_id = account["account_id"]
    with signing_store.transaction() as tx:
        hit = tx.reserve(account_id, 500, DAY, MONTH, caps)
    assert hit is not None
    assert (hit.window.name, hit.limit, hit.spent) == (refused_by, caps.limit_of(refused_by), 0)
    assert set(spent(runtime, account_id).values()) <= {0}
    with signing_store.transaction() as tx:  # what fits is still taken, on the same rows
        assert tx.reserve(account_id, caps.limit_of(refused_by) or 0, DAY, MONTH, caps) is None


def test_a_batchs_totals_over_several_accounts_are_all_added_or_none(
    runtime, signing_store
) -> None:
    """Each account's windows get their own total, and one total past its cap adds nothing
    to any of them (on PostgreSQL the commit fails, the pipeline not waiting for row counts)."""
    accounts = [new_account(runtime)["account_id"] for _ in range(3)]
    caps = Caps(per_payment=None, daily=100, monthly=1_000)
    with signing_store.transaction() as tx:
        for account_id in accounts:
            assert tx.reserve(account_id, 10, DAY, MONTH, caps) is None
        totals = [SpendTotal(a, DAY, MONTH, caps, 20 + i) for i, a in enumerate(accounts)]
        assert tx._sql.add_spends(totals)
    after = [{"daily": 30 + i, "monthly": 30 + i} for i in range(3)]
    assert [spent(runtime, account_id) for account_id in accounts] == after
    with pytest.raises(ReservationLost), signing_store.transaction() as tx:
        totals = [SpendTotal(a, DAY, MONTH, caps, 10) for a in accounts]
        totals[1] = SpendTotal(accounts[1], DAY, MONTH, caps, 70)  # 31 + 70 > 100
        if not tx._sql.add_spends(totals):  # SQLite says so at once
            raise ReservationLost("refused at once")
    assert [spent(runtime, account_id) for account_id in accounts] == after


def test_a_holder_and_their_rules_on_the_sellers_hosts_come_together(
    runtime, signing_store, account
) -> None:
    hosts = ["api.example.com", "example.com"]
    with signing_store.transaction() as tx:
        alone = tx.key_holder(hash_api_key(account["api_key"]), NOW)
    with signing_store.transaction() as tx:
        holder = tx.key_holder(hash_api_key(account["api_key"]), NOW, ReadAhead(hosts))
        assert holder == alone and holder is not None
        rules = tx._sql.grants(holder.account_id, hosts)
        assert [str(grant.rule) for grant in rules] == ["api.example.com"]
        assert tx.grants(holder.account_id, hosts) == rules
    with signing_store.transaction() as tx:
        assert tx.key_holder(hash_api_key("psk_" + "x" * 43), NOW, ReadAhead(hosts)) is None


def test_a_live_payments_windows_are_locked_with_its_holder_and_reserved_in_memory(
    runtime, signing_store, account
) -> None:
    """Read ahead with the holder, the windows are locked (created at 0) before the first
    reservation asks; reservations past a cap are refused from what they have spent, and the
    total is written once, at the commit."""
    key_hash, caps = hash_api_key(account["api_key"]), Caps(None, daily=100, monthly=1_000)
    ahead = ReadAhead(["api.example.com", "example.com"], (DAY, MONTH))
    with signing_store.transaction() as tx:
        holder = tx.key_holder(key_hash, NOW, ahead)
        assert holder is not None
        assert tx.reserve(holder.account_id, 60, DAY, MONTH, caps) is None
        hit = tx.reserve(holder.account_id, 41, DAY, MONTH, caps)
        assert hit is not None and (hit.window, hit.limit, hit.spent) == (DAY, 100, 60)
        assert tx.reserve(holder.account_id, 40, DAY, MONTH, caps) is None
    assert spent(runtime, account["account_id"]) == {"daily": 100, "monthly": 100}
    with signing_store.transaction() as tx:  # the next transaction starts from what is stored
        holder = tx.key_holder(key_hash, NOW, ahead)
        assert holder is not None
        hit = tx.reserve(holder.account_id, 1, DAY, MONTH, caps)
        assert hit is not None and hit.spent == 100
    with signing_store.transaction() as tx:  # an unknown key locks nothing
        assert tx.key_holder(hash_api_key("psk_" + "y" * 43), NOW, ahead) is None
    assert spent(runtime, account["account_id"]) == {"daily": 100, "monthly": 100}


# --- PostgreSQL connections ------------------------------------------------------------------


def postgres_only(store: SigningStore) -> PostgresSigningStore:
    if not isinstance(store, PostgresSigningStore):
        pytest.skip("PostgreSQL connections only")
    return store


def idle_backends(store: PostgresSigningStore) -> list[int]:
    """The server process of each connection the store's pool holds idle."""
    pool = store.pool
    idle = [pool.getconn() for _ in range(pool.get_stats()["pool_available"])]
    try:
        return [conn.info.backend_pid for conn in idle]
    finally:
        for conn in idle:
            pool.putconn(conn)


def terminate(db: Database, backends: list[int]) -> None:
    with db.write() as conn:
        for pid in backends:  # waits until the backend is gone
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})


def payer(runtime, store: SigningStore, account) -> partial[SignedPayment]:
    deps = SigningDeps(store, runtime.vault, runtime.clock, runtime.registry)
    return partial(sign_payment, deps, account["api_key"], signature_body(), sandbox=False)


def test_a_connection_killed_between_two_requests_is_replaced(
    runtime, signing_store, account
) -> None:
    store = postgres_only(signing_store)
    pay = payer(runtime, store, account)
    pay()
    [killed] = idle_backends(store)  # one request at a time: one connection
    terminate(runtime.db, [killed])
    assert pay().header  # no retry on this path: the dead connection was never used
    assert killed not in idle_backends(store)
    assert store.pool.get_stats()["connections_lost"] == 1


def test_after_a_restart_the_first_request_does_not_wait_out_each_dead_connection(
    runtime, signing_store, account
) -> None:
    store = postgres_only(signing_store)
    held = [store.pool.getconn() for _ in range(4)]
    for conn in held:
        store.pool.putconn(conn)
    backends = idle_backends(store)
    assert len(backends) == 4
    terminate(runtime.db, backends)  # what a server restart does to them
    started = time.monotonic()
    assert payer(runtime, store, account)().header
    # psycopg_pool alone would try the dead ones in turn, sleeping 1 s, 2 s, 4 s in between.
    assert time.monotonic() - started < 2.0
    assert set(idle_backends(store)).isdisjoint(backends)


def test_closing_the_store_ends_its_connections_and_threads(runtime) -> None:
    if runtime.db.is_sqlite:
        pytest.skip("PostgreSQL connections only")
    store = PostgresSigningStore(runtime.db)
    with store.transaction():
        pass
    backends = idle_backends(store)
    store.close()
    store.close()
    assert store.pool.closed
    with pytest.raises(RuntimeError):
        store.executor.submit(print)
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids)")
    deadline = time.monotonic() + 5
    while True:  # the server ends a backend shortly after its client says goodbye
        with runtime.db.read() as conn:
            if conn.execute(query, {"pids": backends}).scalar_one() == 0:
                break
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_an_unreachable_database_is_waited_for_once_then_refused_at_once() -> None:
    """Group commit re-runs a failed batch's requests one by one: were each to wait for a
    connection in turn, the last of a batch would wait minutes for its error."""
    db = Database(f"postgresql://postgres@127.0.0.1:{free_port()}/test")  # nothing listens
    store = PostgresSigningStore(db, connections=2, connection_wait=0.3)
    try:
        with pytest.raises(PoolTimeout), store.transaction():
            pass
        with pytest.raises(DatabaseUnreachable), store.transaction():
            pass
    finally:
        db.dispose()
