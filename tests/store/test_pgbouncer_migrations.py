"""Migrations from many processes at once behind a real PgBouncer in transaction mode
(``pgbouncer_support``: two server connections for every client).

Every worker and every operator command runs ``migrate`` at start. Its lock was a session
advisory lock, taken, committed, then released after the upgrade: behind the pooler the commit
gave its server connection back to the pool still holding the lock, the unlock ran on another,
and every later migrator (the operator's ``disable-account`` included) waited for ever.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
import sqlalchemy as sa

from conftest import POSTGRES_URL
from paysign.store.database import Database
from paysign.store.migrate import migrate
from pgbouncer_support import pgbouncer as pgbouncer  # the fixture
from pgbouncer_support import psycopg_url

MIGRATORS = 6
ROUNDS = 4
#: Far longer than the migrations take here (about a second): a migrator still waiting then
#: waits for a lock nobody will let go.
WAIT_SECONDS = 60


def _database_behind(pgbouncer: str) -> str:
    db = Database(pgbouncer, server_prepared_statements=False)
    try:
        with db.read() as conn:
            return str(conn.execute(sa.text("SELECT current_database()")).scalar_one())
    finally:
        db.dispose()


def _direct(database: str) -> psycopg.Connection:
    params = psycopg.conninfo.conninfo_to_dict(psycopg_url(POSTGRES_URL))
    params["dbname"] = database
    return psycopg.connect(psycopg.conninfo.make_conninfo(**params), autocommit=True)


def _migrate_at_once(pgbouncer: str) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(MIGRATORS)

    def migrator() -> None:
        db = Database(pgbouncer, server_prepared_statements=False)
        try:
            start.wait()
            migrate(db)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            db.dispose()

    threads = [threading.Thread(target=migrator, daemon=True) for _ in range(MIGRATORS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)
    hung = sum(thread.is_alive() for thread in threads)
    assert hung == 0, f"{hung} migrators still wait for the migration lock"
    return errors


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_migrators_at_once_leave_no_lock_behind_the_pooler(pgbouncer: str, round_: int) -> None:
    database = _database_behind(pgbouncer)
    with _direct(database) as conn:  # a fresh schema: every migrator finds migrations to apply
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")

    assert _migrate_at_once(pgbouncer) == []

    with _direct(database) as conn:
        held = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
            "WHERE l.locktype = 'advisory' AND d.datname = %s",
            (database,),
        ).fetchone()
        assert held == (0,)
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'alembic_version'"
        ).fetchone()
        assert tables == (1,)
