"""``paysign serve [--workers N]``: the set-up done once (data directory, dev chain, database
migrations), then one server process, or a supervisor and N workers. It never writes the
catalog: a fresh data directory serves an empty one (``paysign demo`` seeds the demo's)."""

from __future__ import annotations

import os
import shutil
import socket

import click
import structlog

from paysign.bootstrap import Runtime, build_runtime, prepare_data_dir
from paysign.chain.devchain import sandbox_chain
from paysign.config import Settings
from paysign.custody import InvalidMasterKey
from paysign.datadir import DataDirExposed, secure_data_dir
from paysign.errors import SchemaFromNewerVersion
from paysign.logging import configure_logging
from paysign.services.durability import warn_if_not_durable
from paysign.serving.process import StopSignals, serve
from paysign.serving.supervisor import Supervisor
from paysign.store.server_settings import max_connections

log = structlog.get_logger("paysign.serve")

METRICS_DIR_NAME = "prometheus-multiproc"
CONNECTOR_STATELESS = "PAYSIGN_CONNECTOR_STATELESS"


def run_serve(settings: Settings, workers: int) -> int:
    """Serve until SIGTERM or SIGINT, then stop cleanly; the exit status."""
    configure_logging(settings.log_level)
    try:
        # Before the dev chain or the database write anything into it.
        prepare_data_dir(settings)
    except DataDirExposed as exc:
        click.echo(f"error: {exc}", err=True)
        return 1
    # A port in use is said before the dev chain and the migrations take their time.
    listener = _bind(settings) if workers > 1 else None
    try:
        return _serve_with_chain(settings, workers, listener)
    except InvalidMasterKey as exc:
        # Fail closed: a service that cannot open its wallets must not start.
        click.echo(f"error: {exc}", err=True)
        return 1
    except SchemaFromNewerVersion as exc:
        click.echo(f"error: {exc.detail}", err=True)
        return 1
    finally:
        if listener is not None:
            listener.close()


def _serve_with_chain(settings: Settings, workers: int, listener: socket.socket | None) -> int:
    # The sandbox dev chain runs for as long as the server, unless PAYSIGN_TESTNET_RPC_URL is set;
    # the settings it yields point testnet_rpc_url (so the reconciler too) at the chain.
    with StopSignals() as stop, sandbox_chain(settings) as settings:
        runtime = build_runtime(settings)
        warn_if_not_durable(runtime.db)
        if listener is None:
            _announce(runtime, workers)
            serve(runtime, stop)
            return 0
        warn_about_connections(runtime, workers)
        runtime.db.dispose()  # the supervisor itself serves nothing
        env = worker_environment(settings)
        _announce(runtime, workers)
        return Supervisor(workers, listener, env, stop).run()


def _announce(runtime: Runtime, workers: int) -> None:
    database = "sqlite" if runtime.db.is_sqlite else "postgresql"
    processes = "" if workers == 1 else f", {workers} workers"
    click.echo(
        f"paysign listening on {runtime.settings.resolved_base_url} "
        f"(database: {database}{processes})",
        err=True,
    )


#: Connections the kernel queues for the workers (uvicorn's default backlog).
LISTEN_BACKLOG = 2048


def _bind(settings: Settings) -> socket.socket:
    """The listening socket the supervisor accepts on for its workers. Listening from the
    start: connections queue while no worker is ready yet (at start, or while a crashed one
    comes back)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((settings.host, settings.port))
    except OSError as exc:
        listener.close()
        raise click.ClickException(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}"
        ) from None
    listener.listen(LISTEN_BACKLOG)
    return listener


def worker_environment(settings: Settings) -> dict[str, str]:
    """The workers' environment: the address the supervisor listens on, the connector without
    MCP sessions unless the operator chose, and a fresh private directory for the metrics of
    several processes unless one is configured (set here too: the supervisor removes the files
    of a worker that exits)."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        secure_data_dir(settings.data_dir)
        metrics_dir = settings.data_dir / METRICS_DIR_NAME
        # A dead process's files would be summed into the new ones' metrics.
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(mode=0o700)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    env = dict(os.environ)
    env["PAYSIGN_HOST"] = settings.host
    env["PAYSIGN_PORT"] = str(settings.port)
    _connector_sessions(settings, env)
    return env


def _connector_sessions(settings: Settings, env: dict[str, str]) -> None:
    # A session lives in one worker's memory while the kernel hands a client's next connection
    # to any worker: only requests that stand alone can be answered wherever they land.
    # Settings match the variable's name in any letter case.
    if not any(name.upper() == CONNECTOR_STATELESS for name in env):
        env[CONNECTOR_STATELESS] = "true"
        log.info(
            "connector_stateless",
            reason="MCP sessions are stateless under several workers: any worker answers any "
            "request; handshake-era clients get no GET stream and no tools/list_changed",
        )
    elif not settings.connector_stateless:
        log.warning(
            "connector_sessions_in_one_worker",
            reason=f"{CONNECTOR_STATELESS} is off: an MCP session's next request may reach "
            "another worker and get 404 (session not found)",
        )


def connections_per_worker(settings: Settings) -> int:
    """The most PostgreSQL connections one server process opens: the engine's pool and its
    overflow, and the signing store's pool."""
    engine = settings.database_pool_size + settings.database_pool_size // 2
    return engine + settings.signing_connections


def warn_about_connections(runtime: Runtime, workers: int) -> bool:
    """Log a warning, and say so, when ``workers`` processes may open more connections than
    the PostgreSQL server allows."""
    if runtime.db.is_sqlite:
        return False
    per_worker = connections_per_worker(runtime.settings)
    try:
        with runtime.db.read() as conn:
            limit = max_connections(conn)
    except Exception:  # a pooler or a proxy that does not say: nothing to compare with
        return False
    if workers * per_worker <= limit:
        return False
    log.warning(
        "database_connections_may_run_out",
        workers=workers,
        per_worker=per_worker,
        needed=workers * per_worker,
        max_connections=limit,
    )
    return True
