"""Backups taken while agents sign, restored, and served again, as real processes.

SQLite: ``paysign backup`` under live signing load is one consistent snapshot (every cap
window equals the ledger it holds), has no master key in it, and ``paysign restore`` into an
empty data directory gives a service where the old API keys sign and the ledger and windows
carry on. PostgreSQL: the documented ``pg_dump`` / ``pg_restore`` recipe, the same way."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import POSTGRES_URL, ServeProcess, make_database_url, ok_json, paysign
from paysign.store.database import normalise_url
from test_account_admin import Agent, account_with_key, sign

pytestmark = pytest.mark.slow


def base_env(data_dir: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    environment["PAYSIGN_DATA_DIR"] = str(data_dir)
    return environment


def run_agents(url: str, keys: list[str]) -> list[Agent]:
    agents = [Agent(url, key, live=True) for key in keys]
    for agent in agents:
        agent.start()
    for agent in agents:
        assert agent.signed_once.wait(30), agent.statuses
    return agents


def more_signed(agents: list[Agent], extra: int = 5) -> None:
    """Wait until every agent has signed ``extra`` more times: the load went on meanwhile."""
    targets = [agent.statuses.count(200) + extra for agent in agents]
    deadline = time.monotonic() + 60
    while any(a.statuses.count(200) < t for a, t in zip(agents, targets, strict=True)):
        assert time.monotonic() < deadline, "the agents stopped signing"
        time.sleep(0.05)


def stop(agents: list[Agent]) -> None:
    for agent in agents:
        agent.stopping.set()
    for agent in agents:
        agent.join(30)
        assert set(agent.statuses) == {200}, agent.statuses


LEDGER = """SELECT nonce, account_id, amount, sandbox, created_at FROM signatures
ORDER BY nonce"""
# Each live window against what the ledger it sits beside says was spent in it.
WINDOWS_VS_LEDGER = """
SELECT w.account_id, w."window", w.start, w.spent,
       (SELECT COALESCE(SUM(s.amount), 0) FROM signatures s
        WHERE s.account_id = w.account_id AND NOT s.sandbox AND s.status = 'signed'
        AND s.created_at >= w.start
        AND (w."window" <> 'daily' OR s.created_at < w.start + 86400))
FROM spend_windows w WHERE w."window" IN ('daily', 'monthly')
"""


def consistent_windows(rows: list[tuple[object, ...]]) -> None:
    assert rows
    for account, window, start, spent, ledger in rows:
        assert spent == ledger, (account, window, start)


def test_sqlite_backup_under_signing_load_then_restore(tmp_path: Path) -> None:
    live_dir, restored_dir = tmp_path / "var", tmp_path / "restored"
    env = base_env(live_dir)
    keys = [account_with_key(env, f"payer{n}@example.com") for n in range(2)]
    backups = tmp_path / "backups"
    backups.mkdir()

    with ServeProcess(env) as url:
        agents = run_agents(url, keys)
        made = paysign(env, "backup", str(backups / "paysign.db"))
        in_dir = ok_json(paysign(env, "backup", str(backups)))  # a directory: a new file in it
        more_signed(agents)
        stop(agents)
    backup = ok_json(made)
    assert "master key is not in the backup" in made.stderr.lower()
    assert "master.key" in made.stderr
    path = Path(backup["backup"])
    assert path == backups / "paysign.db" and oct(path.stat().st_mode & 0o777) == "0o600"
    assert Path(in_dir["backup"]).parent == backups

    key_text = (live_dir / "master.key").read_bytes().strip()
    assert key_text not in path.read_bytes()
    live = sqlite3.connect(live_dir / "paysign.db")
    copy = sqlite3.connect(path)
    backed_up, everything = copy.execute(LEDGER).fetchall(), live.execute(LEDGER).fetchall()
    assert backed_up and set(backed_up) < set(everything)  # a snapshot: the load went on
    consistent_windows(copy.execute(WINDOWS_VS_LEDGER).fetchall())
    spent_before = dict(
        copy.execute("SELECT account_id, spent FROM spend_windows WHERE \"window\" = 'daily'")
    )
    live.close()
    copy.close()

    again = paysign(env, "backup", str(path))
    assert again.returncode == 1 and "already exists" in again.stderr

    # The operator puts the master key back first, then restores.
    restored_env = base_env(restored_dir)
    restored_dir.mkdir(mode=0o700)
    shutil.copy2(live_dir / "master.key", restored_dir / "master.key")
    (restored_dir / "master.key").chmod(0o600)
    restored = ok_json(paysign(restored_env, "restore", str(path)))
    assert restored["masterKeyChecked"] is True
    refused = paysign(restored_env, "restore", str(path))
    assert refused.returncode == 1 and "exists" in refused.stderr

    with ServeProcess(restored_env) as url:
        for key in keys:
            assert sign(url, key, live=True).status_code == 200
    after = sqlite3.connect(restored_dir / "paysign.db")
    ledger_after = after.execute(LEDGER).fetchall()
    assert set(backed_up) <= set(ledger_after) and len(ledger_after) == len(backed_up) + 2
    spent_after = dict(
        after.execute("SELECT account_id, spent FROM spend_windows WHERE \"window\" = 'daily'")
    )
    after.close()
    # The cap windows carried on from the backup (same day unless the test crossed midnight).
    for account, spent in spent_before.items():
        assert spent_after[account] in (spent + 1, 1)


def test_restore_without_its_key_says_so_and_serve_refuses(tmp_path: Path) -> None:
    env = base_env(tmp_path / "var")
    account_with_key(env, "payer@example.com")
    ok_json(paysign(env, "backup", str(tmp_path / "b.db")))
    elsewhere = base_env(tmp_path / "new")
    restored = paysign(elsewhere, "restore", str(tmp_path / "b.db"))
    assert ok_json(restored)["masterKeyChecked"] is False
    assert "put the master key back" in restored.stderr
    listing = paysign(elsewhere, "admin", "list-accounts")
    assert listing.returncode == 1 and "Put that key back" in listing.stderr
    assert not (tmp_path / "new" / "master.key").exists()

    not_a_backup = tmp_path / "junk.db"
    not_a_backup.write_bytes(b"not a database at all" * 100)
    junk = paysign(base_env(tmp_path / "third"), "restore", str(not_a_backup))
    assert junk.returncode == 1 and "not" in junk.stderr


# --- PostgreSQL: the pg_dump recipe of docs/deploy.md ---------------------------------------


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    yield from make_database_url("postgresql", tmp_path)


def libpq(url: str) -> str:
    """A SQLAlchemy URL as the PostgreSQL tools take it."""
    return normalise_url(url).replace("postgresql+psycopg://", "postgresql://")


def test_postgres_pg_dump_under_signing_load_then_pg_restore(
    tmp_path: Path, postgres_url: str
) -> None:
    env = base_env(tmp_path / "var") | {"PAYSIGN_DATABASE_URL": postgres_url}
    keys = [account_with_key(env, f"payer{n}@example.com") for n in range(2)]
    schema = postgres_url.rsplit("csearch_path%3D", 1)[1]
    server_url = libpq(POSTGRES_URL)
    dump = tmp_path / "paysign.dump"
    refused = paysign(env, "backup", str(tmp_path / "x.db"))
    assert refused.returncode == 1 and "pg_dump" in refused.stderr

    with ServeProcess(env) as url:
        agents = run_agents(url, keys)
        subprocess.run(
            ["pg_dump", "--format=custom", f"--schema={schema}", f"--file={dump}", server_url],
            check=True,
            timeout=120,
        )
        more_signed(agents)
        stop(agents)

    database = f"r_{schema}"
    admin = sa.create_engine(normalise_url(POSTGRES_URL), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {database}")
    try:
        restored_url = server_url.rsplit("/", 1)[0] + f"/{database}"
        subprocess.run(
            ["pg_restore", "--no-owner", "--exit-on-error", f"--dbname={restored_url}", str(dump)],
            check=True,
            timeout=120,
        )
        restored = sa.create_engine(normalise_url(restored_url))
        with restored.connect() as conn:
            conn.exec_driver_sql(f"SET search_path TO {schema}")
            consistent_windows(list(conn.exec_driver_sql(WINDOWS_VS_LEDGER).all()))
            backed_up = conn.exec_driver_sql("SELECT count(*) FROM signatures").scalar_one()
        restored.dispose()
        live = sa.create_engine(normalise_url(postgres_url))
        with live.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM signatures").scalar_one() > (
                backed_up
            )
        live.dispose()

        restored_env = env | {
            "PAYSIGN_DATABASE_URL": f"{restored_url}?options=-csearch_path%3D{schema}"
        }
        with ServeProcess(restored_env) as url:
            for key in keys:
                assert sign(url, key, live=True).status_code == 200
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        admin.dispose()
