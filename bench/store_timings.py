"""The signing store's statements timed in process, on the database the server runs on."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.request import NETWORK, PAY_TO, REQUEST_BODY, USDC_BASE


class _Rollback(Exception):
    pass


def store_timings(
    database_url: str | None, data_dir: Path, api_key: str, n: int
) -> dict[str, float]:
    """Median µs of the signing store's statements, in process, on the same database: the
    statements in one transaction that is rolled back, then ``n`` whole committed
    transactions as the service runs them (key + rules + reservation + insert; no signing)."""
    from paysign.policy.caps import windows_at
    from paysign.policy.rules import candidate_hosts, seller_location
    from paysign.services.keys import hash_api_key
    from paysign.store.database import Database
    from paysign.store.postgres_statements import PostgresStatements, psycopg_style
    from paysign.store.repositories import SignatureRecord
    from paysign.store.signing_postgres import PostgresSigningStore
    from paysign.store.signing_sqlite import SqliteSigningStore
    from paysign.store.signing_statements import SqlStatements
    from paysign.store.signing_store import SigningStore

    db = None
    store: SigningStore
    if database_url is None:
        store = SqliteSigningStore(str(data_dir / "paysign.db"))
    else:
        db = Database(database_url, pool_size=1)
        store = PostgresSigningStore(db)
    key_hash = hash_api_key(api_key)
    hosts = candidate_hosts(seller_location(str(REQUEST_BODY["sellerUrl"])))
    now = int(time.time())

    def timed(fn: Callable[[], object], count: int) -> float:
        for _ in range(min(50, count)):
            fn()
        lat = []
        for _ in range(count):
            t = time.perf_counter_ns()
            fn()
            lat.append(time.perf_counter_ns() - t)
        return statistics.median(lat) / 1000

    def record(account_id: str, key_id: str | None) -> SignatureRecord:
        return SignatureRecord(
            account_id=account_id,
            api_key_id=key_id,
            seller_host="api.example.com",
            seller_path="/weather",
            network=NETWORK,
            asset=USDC_BASE,
            pay_to=PAY_TO.lower(),
            amount=10000,
            nonce=os.urandom(32),
            valid_before=now + 60,
            sandbox=False,
            x402_version=2,
            created_at=now,
            tier="OPEN_ECOSYSTEM",
            rule="api.example.com",
        )

    @contextlib.contextmanager
    def statements(store: SigningStore) -> Iterator[SqlStatements]:
        if isinstance(store, PostgresSigningStore):
            with store.pool.connection() as conn, conn.cursor() as cur:
                yield PostgresStatements(cur, psycopg_style)
            return
        lite = sqlite3.connect(str(data_dir / "paysign.db"), isolation_level=None)
        try:
            lite.execute("BEGIN IMMEDIATE")
            try:
                yield SqlStatements(lite.cursor(), str)
            finally:
                lite.execute("ROLLBACK")
        finally:
            lite.close()

    out: dict[str, float] = {}
    try:
        # The statements themselves, on a connection of their own in a transaction that is
        # rolled back: a store transaction would answer repeats from memory.
        with contextlib.suppress(_Rollback), statements(store) as sql:
            holder = sql.key_holder(key_hash, now)
            assert holder is not None
            aid, kid = holder.account_id, holder.key_id
            out["key_holder"] = timed(lambda: sql.key_holder(key_hash, now), n)
            out["grant_rows"] = len(sql.grants(aid, hosts))
            out["grants"] = timed(lambda: sql.grants(aid, hosts), n)
            out["insert"] = timed(lambda: sql.insert_signatures([record(aid, kid)]), n)
            raise _Rollback

        def whole() -> None:
            with store.transaction() as tx:
                h = tx.key_holder(key_hash, now)
                assert h is not None
                tx.grants(h.account_id, hosts)
                tx.reserve(h.account_id, 10000, *windows_at(now), h.policy.caps)
                tx.insert_signature(record(h.account_id, h.key_id))

        out["whole"] = timed(whole, max(100, n // 4))
    finally:
        store.close()
        if db is not None:
            db.dispose()
    return out
