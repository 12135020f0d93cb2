"""``paysign``: run the service and administer it.

    paysign --version
    paysign serve [--host H] [--port P] [--workers N]
    paysign demo [--host H] [--port P]
    paysign reconcile
    paysign admin create-account --email E [--password-file F]   (else asked for, hidden)
    paysign admin issue-key --email E [--expires-in-days N]
    paysign admin revoke-key --email E
    paysign admin get-policy --email E
    paysign admin set-policy --email E --file policy.json
    paysign admin approve-seller --email E --seller HOST[/PATH]
    paysign admin deny-seller --email E --seller HOST[/PATH]
    paysign admin freeze --email E | unfreeze --email E
    paysign admin activity --email E [--limit N]
    paysign admin list-accounts [--json]
    paysign admin disable-account --email E | enable-account --email E
    paysign admin reset-authenticator --email E
    paysign admin reset-password --email E [--password-file FILE]
    paysign admin rotate-master-key
    paysign backup DEST | restore SRC
    paysign catalog import FILE [--prune] | remove NAME | list [--tier T] [--tag T] [--json]
    paysign check
    paysign migrate [--status]
    paysign pay URL [-X M] [-H 'K: V'] [-d DATA] [--sandbox] [--max-usdc A]
    paysign call NAME key=value …
    paysign status [--seller URL] [--json]
    paysign devchain info | reset

Admin commands print one JSON object on stdout, act on the same database as the server
(``PAYSIGN_DATABASE_URL`` or ``PAYSIGN_DATA_DIR``), and exit 1 with a message on refusal.
One module per area: ``admin.py`` (accounts, keys), ``policy.py``, ``catalog.py``,
``ops.py`` (check, migrate), ``accounts.py`` (list, disable, authenticator reset),
``custody.py`` (master-key rotation, backup, restore); this one holds the top-level group
and the service's own commands.
"""

from __future__ import annotations

import sys

import click

from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.chain.cli import devchain
from paysign.chain.devchain_files import running_devchain
from paysign.cli._common import built, emit
from paysign.cli.accounts import ACCOUNT_COMMANDS
from paysign.cli.admin import admin
from paysign.cli.catalog import catalog
from paysign.cli.custody import CUSTODY_ADMIN_COMMANDS, CUSTODY_COMMANDS
from paysign.cli.ops import check, environment_settings, migrate
from paysign.cli.policy import POLICY_COMMANDS
from paysign.client.catalog_cli import catalog_list
from paysign.client.cli import call, pay
from paysign.client.status_cli import status
from paysign.config import Settings
from paysign.demo.cli import demo
from paysign.services.reconcile import reconcile


@click.group()
@click.version_option(package_name="paysign", prog_name="paysign", message="%(prog)s %(version)s")
def main() -> None:
    """paysign — custodial x402 payment signing for AI agents."""


@main.command()
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to listen on (default 8402).")
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Server processes on the port (more than 1: a supervisor starts them; docs/deploy.md).",
)
def serve(host: str | None, port: int | None, workers: int) -> None:
    """Run the service with the embedded defaults (or the PAYSIGN_* settings)."""
    from paysign.serving.command import run_serve

    sys.exit(run_serve(environment_settings(host, port), workers))


@main.command("reconcile")
def reconcile_command() -> None:
    """Release the spend of signatures that expired unused (asks the chain); prints a report.

    Needs PAYSIGN_MAINNET_RPC_URL and/or PAYSIGN_TESTNET_RPC_URL; other networks are skipped.
    """
    settings = Settings()
    if not settings.testnet_rpc_url:
        # The embedded default: the dev chain a running `paysign serve` started, if any.
        running = running_devchain(settings.data_dir)
        if running is not None:
            settings = settings.model_copy(update={"testnet_rpc_url": running.rpc_url})
    runtime = built(settings)
    chain = RpcAuthorizationStates(settings.rpc_urls)
    try:
        report = reconcile(
            runtime.db, runtime.clock, chain, grace_seconds=settings.reconcile_grace_seconds
        )
    finally:
        chain.close()
    emit({"networks": sorted(chain.networks), **report.as_dict()})


# Registration: one line per command, grouped by the module that defines it.
for command in POLICY_COMMANDS:
    admin.add_command(command)
for command in ACCOUNT_COMMANDS:  # list, disable, enable, reset-authenticator, reset-password
    admin.add_command(command)
for command in CUSTODY_ADMIN_COMMANDS:  # rotate-master-key
    admin.add_command(command)
for command in CUSTODY_COMMANDS:  # paysign backup, paysign restore
    main.add_command(command)
main.add_command(admin)
main.add_command(catalog)
main.add_command(devchain)
main.add_command(check)  # paysign check, paysign migrate: before serving, when upgrading
main.add_command(migrate)
main.add_command(demo)  # paysign demo: sellers and a facilitator beside the service
# The buyer's commands: paysign pay, paysign call, paysign catalog list (docs/client.md).
main.add_command(pay)
main.add_command(call)
main.add_command(status)  # paysign status: what the API key's wallet can still spend
catalog.add_command(catalog_list)
