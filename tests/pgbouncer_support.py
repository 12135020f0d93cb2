"""A real PgBouncer in transaction pooling mode for the tests (Debian's package), in front of a
fresh database: two server connections serve every client connection of a test module, one
transaction at a time, so whatever a client leaves on a server connection (a prepared
statement, a session setting) meets another client's next transaction there."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from conftest import POSTGRES_URL, TEST_MASTER_KEY, FrozenClock, free_port
from paysign.bootstrap import Runtime, asset_registry
from paysign.config import Settings
from paysign.custody import EnvelopeVault
from paysign.store.database import Database, normalise_url
from paysign.store.migrate import migrate

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
SERVER_CONNECTIONS = 2


def psycopg_url(url: str) -> str:
    """``url`` as psycopg takes it (a SQLAlchemy URL names its driver)."""
    return normalise_url(url).replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture(scope="module")
def pgbouncer() -> Iterator[str]:
    """A PgBouncer in transaction mode in front of a fresh database: its SQLAlchemy URL."""
    if not Path(PGBOUNCER).exists():
        pytest.fail("pgbouncer is not installed (`make test` installs Debian's package)")
    server = psycopg.conninfo.conninfo_to_dict(psycopg_url(POSTGRES_URL))
    database = f"paysign_pgbouncer_{secrets.token_hex(4)}"
    with psycopg.connect(psycopg_url(POSTGRES_URL), autocommit=True) as conn:
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
        with psycopg.connect(psycopg_url(POSTGRES_URL), autocommit=True) as conn:
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


def runtime_behind(url: str, tmp_path: Path, *, pooler: bool) -> Runtime:
    """A runtime on ``url`` with ``database_transaction_pooler`` set to ``pooler``."""
    settings = Settings(
        data_dir=tmp_path / "var", database_url=url, database_transaction_pooler=pooler
    )
    db = Database(url, server_prepared_statements=not settings.database_transaction_pooler)
    migrate(db)
    return Runtime(
        settings, db, EnvelopeVault(TEST_MASTER_KEY), FrozenClock(), asset_registry(settings)
    )


def signed_and_spent(db: Database, account_id: str) -> tuple[int, dict[str, int]]:
    """The account's signatures in the ledger, and its spend by window name."""
    with db.read() as conn:
        signed = conn.execute(
            sa.text("SELECT count(*) FROM signatures WHERE account_id = :a"), {"a": account_id}
        ).scalar_one()
        windows = conn.execute(
            sa.text('SELECT "window", spent FROM spend_windows WHERE account_id = :a'),
            {"a": account_id},
        )
        return int(signed), {name: int(spent) for name, spent in windows}
