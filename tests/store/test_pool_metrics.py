"""The signing store's PostgreSQL pool in the metrics: every connection handed out is a wait
observed, every wait that ended with none a timeout (real PostgreSQL)."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import REGISTRY as METRICS
from psycopg_pool import PoolTimeout

from paysign.store.database import Database
from paysign.store.signing_postgres import PostgresSigningStore

POSTGRESQL_ONLY = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def pool_metrics() -> tuple[float, float]:
    waits = METRICS.get_sample_value("paysign_db_pool_wait_seconds_count") or 0.0
    timeouts = METRICS.get_sample_value("paysign_db_pool_timeouts_total") or 0.0
    return waits, timeouts


@POSTGRESQL_ONLY
def test_a_full_pool_shows_as_waits_and_a_timeout(db: Database) -> None:
    store = PostgresSigningStore(db, connections=1, connection_wait=0.2)
    waits, timeouts = pool_metrics()
    refused: list[BaseException] = []

    def second_transaction() -> None:
        try:
            with store.transaction():
                pass
        except PoolTimeout as exc:
            refused.append(exc)

    try:
        with store.transaction():  # holds the pool's only connection
            other = threading.Thread(target=second_transaction)
            other.start()
            other.join()
        assert len(refused) == 1
        assert pool_metrics() == (waits + 1, timeouts + 1)
    finally:
        store.close()
