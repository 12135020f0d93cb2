"""paysign behind a real PgBouncer in transaction pooling mode.

Two server connections serve every client connection of the test, one transaction at a time:
whatever a client left on a server connection (a prepared statement, a session setting) meets
another client's next transaction there. With ``database_transaction_pooler`` set, payments sign
and are counted exactly; without it, psycopg's prepared statements collide on the shared
server connections — the control that shows this test can tell the two apart.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from conftest import (
    POSTGRES_URL,
    TEST_MASTER_KEY,
    FrozenClock,
    free_port,
    new_account,
    signature_body,
)
from paysign.bootstrap import Runtime, asset_registry
from paysign.config import Settings
from paysign.custody import EnvelopeVault
from paysign.errors import PaysignError
from paysign.services.job_leases import JobLease, lease_holder
from paysign.services.signing import SigningDeps, by_api_key, sign_payment_for
from paysign.store.database import Database, normalise_url
from paysign.store.migrate import migrate
from paysign.store.signing_store import signing_store_for

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
SERVER_CONNECTIONS = 2
PAYMENTS = 160
AMOUNT = 1_000


def _plain_url(url: str) -> str:
    return normalise_url(url).replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture(scope="module")
def pgbouncer() -> Iterator[str]:
    """A PgBouncer in transaction mode in front of a fresh database: its SQLAlchemy URL."""
    if not Path(PGBOUNCER).exists():
        pytest.fail("pgbouncer is not installed (`make test` installs Debian's package)")
    server = psycopg.conninfo.conninfo_to_dict(_plain_url(POSTGRES_URL))
    database = f"paysign_pgbouncer_{secrets.token_hex(4)}"
    with psycopg.connect(_plain_url(POSTGRES_URL), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    # PgBouncer refuses to run as root: as root, it runs as postgres, from a directory it reads.
    workdir = Path(tempfile.mkdtemp(prefix="paysign-pgbouncer-"))
    port = free_port()
    config = workdir / "pgbouncer.ini"
    config.write_text(
        f"[databases]\n"
        f"paysign = host={server.get('host', '127.0.0.1')} port={server.get('port', 5432)} "
        f"dbname={database} user={server.get('user', 'postgres')}\n"
        f"[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = any\npool_mode = transaction\n"
        f"default_pool_size = {SERVER_CONNECTIONS}\nmax_client_conn = 500\n"
        f"logfile = {workdir / 'pgbouncer.log'}\npidfile = {workdir / 'pgbouncer.pid'}\n"
    )
    command = [PGBOUNCER, str(config)]
    if os.geteuid() == 0:
        shutil.chown(workdir, "postgres")
        workdir.chmod(0o700)
        command = ["runuser", "-u", "postgres", "--", *command]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_listening(port, proc)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/paysign"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
        with psycopg.connect(_plain_url(POSTGRES_URL), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pgbouncer exited: {proc.stderr.read() if proc.stderr else ''!r}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("pgbouncer did not listen")


def _runtime(url: str, tmp_path: Path, *, pooler: bool) -> Runtime:
    settings = Settings(
        data_dir=tmp_path / "var", database_url=url, database_transaction_pooler=pooler
    )
    db = Database(url, server_prepared_statements=not settings.database_transaction_pooler)
    migrate(db)
    return Runtime(
        settings, db, EnvelopeVault(TEST_MASTER_KEY), FrozenClock(), asset_registry(settings)
    )


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


def _spent(runtime: Runtime, account_id: str) -> tuple[int, dict[str, int]]:
    with runtime.db.read() as conn:
        signed = conn.execute(
            sa.text("SELECT count(*) FROM signatures WHERE account_id = :a"), {"a": account_id}
        ).scalar_one()
        windows = conn.execute(
            sa.text('SELECT "window", spent FROM spend_windows WHERE account_id = :a'),
            {"a": account_id},
        )
        return int(signed), {name: int(spent) for name, spent in windows}


def test_payments_sign_and_count_exactly_behind_pgbouncer(pgbouncer: str, tmp_path: Path) -> None:
    runtime = _runtime(pgbouncer, tmp_path, pooler=True)
    try:
        created = new_account(runtime)
        account_id, api_key = created["account_id"], created["api_key"]
        answers = _pay_concurrently(runtime, api_key)
        failures = [a for a in answers if isinstance(a, Exception)]
        assert failures == []
        total = PAYMENTS * AMOUNT
        assert _spent(runtime, account_id) == (PAYMENTS, {"daily": total, "monthly": total})
    finally:
        runtime.db.dispose()


def test_without_the_setting_prepared_statements_collide_on_shared_connections(
    pgbouncer: str, tmp_path: Path
) -> None:
    runtime = _runtime(pgbouncer, tmp_path, pooler=False)
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
    runtime = _runtime(pgbouncer, tmp_path, pooler=True)
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
