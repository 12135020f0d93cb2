"""``paysign admin``: accounts, API keys and activity."""

from __future__ import annotations

import click

from paysign.cli._common import emit, iso, run, runtime
from paysign.cli.password_input import holder_password, password_file_option
from paysign.services import accounts, activity, keys


@click.group()
def admin() -> None:
    """Operator commands: accounts, API keys, policy."""


@admin.command("create-account")
@click.option("--email", required=True)
@password_file_option
@click.option(
    "--password",
    help="UNSAFE: the password on the command line, visible to every local user and kept in "
    "shell history; prefer --password-file or the prompt.",
)
def create_account(email: str, password: str | None, password_file: str | None) -> None:
    """Create an account and its wallet; prints accountId, email, walletAddress, totpSecret.

    Without --password or --password-file, asks for the password (hidden, twice) in a terminal.
    """
    chosen_password = holder_password(password, password_file)

    def act() -> None:
        rt = runtime()
        created = accounts.create_account(
            rt.db, rt.vault, rt.clock, email=email, password=chosen_password
        )
        emit(
            {
                "accountId": created.account_id,
                "email": created.email,
                "walletAddress": created.wallet_address,
                "totpSecret": created.totp_secret,
            }
        )

    run(act)


@admin.command("issue-key")
@click.option("--email", required=True)
@click.option("--expires-in-days", type=int, default=keys.DEFAULT_EXPIRY_DAYS, show_default=True)
def issue_key(email: str, expires_in_days: int) -> None:
    """Issue the account's API key (shown once); refused while one is active."""

    def act() -> None:
        rt = runtime()
        issued = keys.issue_key(rt.db, rt.clock, email=email, expires_in_days=expires_in_days)
        emit({"apiKey": issued.api_key, "expiresAt": iso(issued.expires_at)})

    run(act)


@admin.command("revoke-key")
@click.option("--email", required=True)
def revoke_key(email: str) -> None:
    """Revoke the account's active API key."""

    def act() -> None:
        rt = runtime()
        keys.revoke_key(rt.db, rt.clock, email=email)
        emit({"revoked": True, "email": accounts.normalise_email(email)})

    run(act)


@admin.command("activity")
@click.option("--email", required=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
def activity_command(email: str, limit: int) -> None:
    """Every signature and refusal of the account, newest first, with the deciding rule."""

    def act() -> None:
        emit({"activity": activity.activity(runtime().db, email=email, limit=limit)})

    run(act)
