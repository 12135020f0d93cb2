"""``paysign``: run the service and administer it.

    paysign serve [--host H] [--port P] [--workers N]
    paysign demo [--host H] [--port P]
    paysign reconcile
    paysign admin create-account --email E --password P
    paysign admin issue-key --email E [--expires-in-days N]
    paysign admin revoke-key --email E
    paysign admin get-policy --email E
    paysign admin set-policy --email E --file policy.json
    paysign admin approve-seller --email E --seller HOST[/PATH]
    paysign admin deny-seller --email E --seller HOST[/PATH]
    paysign admin activity --email E [--limit N]
    paysign catalog import FILE | list [--tier T] [--tag T]
    paysign pay URL [-X M] [-H 'K: V'] [-d DATA] [--sandbox] [--max-usdc A]
    paysign call NAME key=value …
    paysign devchain info | reset

Admin commands print one JSON object on stdout, act on the same database as the server
(``PAYSIGN_DATABASE_URL`` or ``PAYSIGN_DATA_DIR``), and exit 1 with a message on refusal.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any, Literal

import click
import orjson

from paysign.bootstrap import Runtime, build_runtime
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.chain.cli import devchain
from paysign.chain.devchain_files import running_devchain
from paysign.config import Settings
from paysign.datadir import DataDirExposed
from paysign.demo.cli import demo
from paysign.errors import InvalidCatalog, InvalidPolicy, PaysignError
from paysign.logging import configure_logging
from paysign.services import accounts, activity, keys, policy
from paysign.services.catalog import import_catalog
from paysign.services.reconcile import reconcile


def _emit(obj: dict[str, Any]) -> None:
    click.echo(orjson.dumps(obj).decode())


def _iso(unix_seconds: int) -> str:
    return datetime.fromtimestamp(unix_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read_json(path: str, invalid: type[InvalidCatalog] | type[InvalidPolicy]) -> object:
    """A JSON file (``-``: standard input); ``invalid`` names the document on a parse error."""
    with click.open_file(path, "rb") as handle:
        raw = handle.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid("", f"the file is not valid JSON ({exc})") from None


def _runtime() -> Runtime:
    return _built(Settings())


def _built(settings: Settings) -> Runtime:
    # Log lines (a data directory tightened) go to stderr: stdout is the command's JSON.
    configure_logging("warning")
    try:
        return build_runtime(settings)
    except DataDirExposed as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@click.group()
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

    sys.exit(run_serve(Settings.listening_on(host, port), workers))


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
    runtime = _built(settings)
    chain = RpcAuthorizationStates(settings.rpc_urls)
    try:
        report = reconcile(
            runtime.db, runtime.clock, chain, grace_seconds=settings.reconcile_grace_seconds
        )
    finally:
        chain.close()
    _emit({"networks": sorted(chain.networks), **report.as_dict()})


@main.group()
def admin() -> None:
    """Operator commands: accounts and API keys."""


def _run(action: Any) -> None:
    try:
        action()
    except PaysignError as exc:
        click.echo(f"error: {exc.detail}", err=True)
        sys.exit(1)


@admin.command("create-account")
@click.option("--email", required=True)
@click.option("--password", required=True)
def create_account(email: str, password: str) -> None:
    """Create an account and its wallet; prints accountId, email, walletAddress, totpSecret."""

    def act() -> None:
        rt = _runtime()
        created = accounts.create_account(rt.db, rt.vault, rt.clock, email=email, password=password)
        _emit(
            {
                "accountId": created.account_id,
                "email": created.email,
                "walletAddress": created.wallet_address,
                "totpSecret": created.totp_secret,
            }
        )

    _run(act)


@admin.command("issue-key")
@click.option("--email", required=True)
@click.option("--expires-in-days", type=int, default=keys.DEFAULT_EXPIRY_DAYS, show_default=True)
def issue_key(email: str, expires_in_days: int) -> None:
    """Issue the account's API key (shown once); refused while one is active."""

    def act() -> None:
        rt = _runtime()
        issued = keys.issue_key(rt.db, rt.clock, email=email, expires_in_days=expires_in_days)
        _emit({"apiKey": issued.api_key, "expiresAt": _iso(issued.expires_at)})

    _run(act)


@admin.command("revoke-key")
@click.option("--email", required=True)
def revoke_key(email: str) -> None:
    """Revoke the account's active API key."""

    def act() -> None:
        rt = _runtime()
        keys.revoke_key(rt.db, rt.clock, email=email)
        _emit({"revoked": True, "email": accounts.normalise_email(email)})

    _run(act)


@admin.command("get-policy")
@click.option("--email", required=True)
def get_policy(email: str) -> None:
    """Print the account's source policy as one JSON document (docs/policy.md)."""

    def act() -> None:
        _emit(policy.get_policy(_runtime().db, email=email))

    _run(act)


@admin.command("set-policy")
@click.option("--email", required=True)
@click.option(
    "--file",
    "path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="The policy document; '-' reads standard input.",
)
def set_policy(email: str, path: str) -> None:
    """Replace the account's source policy with the document in FILE; prints the result."""

    def act() -> None:
        document = _read_json(path, InvalidPolicy)
        rt = _runtime()
        _emit(policy.set_policy(rt.db, rt.clock, email=email, document=document))

    _run(act)


def _decide_seller(email: str, seller: str, kind: Literal["allow", "deny"]) -> None:
    def act() -> None:
        rt = _runtime()
        _emit(policy.decide_seller(rt.db, rt.clock, email=email, seller=seller, kind=kind))

    _run(act)


@admin.command("approve-seller")
@click.option("--email", required=True)
@click.option("--seller", required=True, help="host[/path-prefix], e.g. api.example.com/v1")
def approve_seller(email: str, seller: str) -> None:
    """Add a seller to the allow list (off the deny list) and settle its pending entries."""
    _decide_seller(email, seller, "allow")


@admin.command("deny-seller")
@click.option("--email", required=True)
@click.option("--seller", required=True, help="host[/path-prefix], e.g. api.example.com/v1")
def deny_seller(email: str, seller: str) -> None:
    """Add a seller to the deny list (off the allow list) and settle its pending entries."""
    _decide_seller(email, seller, "deny")


@main.group()
def catalog() -> None:
    """The catalog of paid endpoints."""


@catalog.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def catalog_import(path: str) -> None:
    """Validate a catalog file (all three tiers) and upsert its listings by id."""

    def act() -> None:
        document = _read_json(path, InvalidCatalog)
        rt = _runtime()
        _emit(import_catalog(rt.db, rt.clock, document))

    _run(act)


@admin.command("activity")
@click.option("--email", required=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
def activity_command(email: str, limit: int) -> None:
    """Every signature and refusal of the account, newest first, with the deciding rule."""

    def act() -> None:
        _emit({"activity": activity.activity(_runtime().db, email=email, limit=limit)})

    _run(act)


main.add_command(devchain)
main.add_command(demo)  # paysign demo: sellers and a facilitator beside the service

# The buyer's commands: paysign pay, paysign call, paysign catalog list (docs/client.md).
from paysign.client.cli import call, catalog_list, pay  # noqa: E402

main.add_command(pay)
main.add_command(call)
catalog.add_command(catalog_list)
