"""``paysign check`` and ``paysign migrate``: what an operator runs before serving and when
upgrading (docs/deploy.md)."""

from __future__ import annotations

import sys

import click
import sqlalchemy as sa
from pydantic import ValidationError

from paysign.bootstrap import existing_database, open_database
from paysign.chain.rpc import JsonRpc
from paysign.cli._common import emit, run
from paysign.config import Settings
from paysign.custody import KeyVault, MasterKeyMissing, vault_from_settings
from paysign.datadir import DataDirExposed
from paysign.logging import configure_logging
from paysign.services.config_check import (
    Probes,
    check_configuration,
    database_description,
    failed,
)
from paysign.services.migrations import (
    apply_migrations,
    migration_status,
    refuse_newer,
    status_report,
)


def environment_settings(
    host: str | None = None, port: int | None = None, *, as_check_lines: bool = False
) -> Settings:
    """The environment's settings (with ``--host``/``--port``); an invalid one is named, never
    its value, and the command exits 1."""
    try:
        return Settings.listening_on(host, port)
    except ValidationError as exc:
        for error in exc.errors():
            name = "PAYSIGN_" + "_".join(str(part) for part in error["loc"]).upper()
            reason = str(error["msg"]).removeprefix("Value error, ").removeprefix(f"{name}: ")
            if as_check_lines:
                click.echo(f"FAIL settings: {name}: {reason}")
            else:
                click.echo(f"error: {name}: {reason}", err=True)
        sys.exit(1)


def _chain_id(url: str) -> int:
    with JsonRpc(url, timeout=5.0) as rpc:
        return rpc.chain_id()


@click.command("check")
def check() -> None:
    """Read the configuration and reach what it names (database, master key, RPC endpoints,
    public URLs): one line per item, exit status 1 on a problem. Changes nothing."""
    settings = environment_settings(as_check_lines=True)
    configure_logging("warning")

    def vault() -> KeyVault | None:
        try:
            return vault_from_settings(settings, create=False)
        except MasterKeyMissing:
            return None

    probes = Probes(lambda: existing_database(settings), vault, _chain_id)
    lines = check_configuration(settings, probes)
    for line in lines:
        click.echo(line.render())
    sys.exit(1 if failed(lines) else 0)


@click.command("migrate")
@click.option(
    "--status", "status_only", is_flag=True, help="Say where the schema is; change nothing."
)
def migrate(status_only: bool) -> None:
    """Apply the database migrations without serving (serve applies them at start too)."""
    settings = environment_settings()
    configure_logging("warning")
    described = database_description(settings.resolved_database_url)

    def act() -> None:
        if status_only:
            db = existing_database(settings)
            if db is None:
                emit({"database": described, "exists": False})
                return
            try:
                status = migration_status(db)
            finally:
                db.dispose()
            emit({"database": described, **status_report(status)})
            refuse_newer(status)
            return
        try:
            db = open_database(settings, migrated=False)
        except DataDirExposed as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        try:
            emit({"database": described, **apply_migrations(db)})
        finally:
            db.dispose()

    try:
        run(act)
    except sa.exc.DBAPIError as exc:
        first = str(exc.orig).strip().splitlines()
        click.echo(f"error: cannot use {described}: {first[0] if first else exc}", err=True)
        sys.exit(1)
