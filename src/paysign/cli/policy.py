"""``paysign admin``'s policy commands: read, replace, approve or deny a seller, freeze or
unfreeze spending."""

from __future__ import annotations

from typing import Literal

import click

from paysign.cli._common import emit, read_json, run, runtime
from paysign.errors import InvalidPolicy
from paysign.services import policy


@click.command("get-policy")
@click.option("--email", required=True)
def get_policy(email: str) -> None:
    """Print the account's source policy as one JSON document (docs/policy.md)."""

    def act() -> None:
        emit(policy.get_policy(runtime().db, email=email))

    run(act)


@click.command("set-policy")
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
        document = read_json(path, InvalidPolicy)
        rt = runtime()
        emit(policy.set_policy(rt.db, rt.clock, email=email, document=document))

    run(act)


def _decide_seller(email: str, seller: str, kind: Literal["allow", "deny"]) -> None:
    def act() -> None:
        rt = runtime()
        emit(policy.decide_seller(rt.db, rt.clock, email=email, seller=seller, kind=kind))

    run(act)


@click.command("approve-seller")
@click.option("--email", required=True)
@click.option("--seller", required=True, help="host[/path-prefix], e.g. api.example.com/v1")
def approve_seller(email: str, seller: str) -> None:
    """Add a seller to the allow list (off the deny list) and settle its pending entries."""
    _decide_seller(email, seller, "allow")


@click.command("deny-seller")
@click.option("--email", required=True)
@click.option("--seller", required=True, help="host[/path-prefix], e.g. api.example.com/v1")
def deny_seller(email: str, seller: str) -> None:
    """Add a seller to the deny list (off the allow list) and settle its pending entries."""
    _decide_seller(email, seller, "deny")


def _set_frozen(email: str, frozen: bool) -> None:
    def act() -> None:
        rt = runtime()
        emit(policy.freeze_spending(rt.db, rt.clock, email=email, frozen=frozen))

    run(act)


@click.command("freeze")
@click.option("--email", required=True)
def freeze(email: str) -> None:
    """Freeze the account's spending: every payment refused, live and sandbox (the API key
    keeps working for the catalog)."""
    _set_frozen(email, True)


@click.command("unfreeze")
@click.option("--email", required=True)
def unfreeze(email: str) -> None:
    """Unfreeze the account's spending: its policy decides again."""
    _set_frozen(email, False)


POLICY_COMMANDS = (get_policy, set_policy, approve_seller, deny_seller, freeze, unfreeze)
