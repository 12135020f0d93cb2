"""``paysign admin``: listing accounts, disabling and enabling them, resetting an authenticator
or a forgotten password."""

from __future__ import annotations

import click

from paysign.cli._common import emit, iso, run, runtime
from paysign.cli.password_input import holder_password, password_file_option
from paysign.services import account_admin
from paysign.services.portal_sign_in import authenticator_uri


@click.command("list-accounts")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of a table.")
def list_accounts(as_json: bool) -> None:
    """Every account: email, wallet address, created, disabled or not, its live API key's expiry."""

    def act() -> None:
        rt = runtime()
        found = account_admin.list_accounts(rt.db, rt.clock)
        rows = [
            {
                "accountId": account.id,
                "email": account.email,
                "walletAddress": account.wallet_address,
                "createdAt": iso(account.created_at),
                "disabled": account.disabled_at is not None,
                "disabledAt": None if account.disabled_at is None else iso(account.disabled_at),
                "apiKeyExpiresAt": (
                    None
                    if account.active_key_expires_at is None
                    else iso(account.active_key_expires_at)
                ),
            }
            for account in found
        ]
        if as_json:
            emit({"accounts": rows})
            return
        click.echo(f"{'EMAIL':<40} {'WALLET':<42} {'CREATED':<20} {'STATE':<8} API KEY UNTIL")
        for row in rows:
            state = "disabled" if row["disabled"] else "active"
            email = _shown(str(row["email"]))
            click.echo(
                f"{email:<40} {row['walletAddress']:<42} {row['createdAt']:<20} "
                f"{state:<8} {row['apiKeyExpiresAt'] or '-'}"
            )

    run(act)


def _shown(text: str) -> str:
    """``text`` for a terminal: an invisible or control character (an escape sequence in an
    email made before such emails were refused) is written as its code, never sent raw."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


@click.command("disable-account")
@click.option("--email", required=True)
def disable_account(email: str) -> None:
    """Refuse the account's API keys, OAuth tokens and sign-in; nothing is deleted."""

    def act() -> None:
        rt = runtime()
        done = account_admin.disable_account(rt.db, rt.clock, email=email)
        emit(
            {
                "email": done.email,
                "disabled": True,
                "changed": done.changed,
                "sessionsEnded": done.sessions_ended,
            }
        )

    run(act)


@click.command("enable-account")
@click.option("--email", required=True)
def enable_account(email: str) -> None:
    """Let a disabled account's keys, tokens and sign-in work again."""

    def act() -> None:
        rt = runtime()
        changed = account_admin.enable_account(rt.db, email=email)
        emit({"email": email.strip().lower(), "disabled": False, "changed": changed})

    run(act)


@click.command("reset-authenticator")
@click.option("--email", required=True)
def reset_authenticator(email: str) -> None:
    """A new authenticator secret, printed once; the account's sessions and OAuth grants end."""

    def act() -> None:
        rt = runtime()
        reset = account_admin.reset_authenticator(rt.db, rt.vault, rt.clock, email=email)
        emit(
            {
                "email": reset.email,
                "totpSecret": reset.totp_secret,
                "otpauthUri": authenticator_uri(reset.totp_secret, reset.email),
                "sessionsEnded": reset.sessions_ended,
                "grantsRevoked": reset.grants_revoked,
            }
        )
        click.echo(
            "Give this secret to the holder over a channel you trust; it is not shown again.",
            err=True,
        )

    run(act)


@click.command("reset-password")
@click.option("--email", required=True)
@password_file_option
def reset_password(email: str, password_file: str | None) -> None:
    """A new password for a holder who forgot theirs (asked for, hidden, twice, in a terminal);
    the account's sessions and OAuth grants end. The authenticator and API key stay."""
    new_password = holder_password(None, password_file)

    def act() -> None:
        rt = runtime()
        reset = account_admin.reset_password(rt.db, rt.clock, email=email, password=new_password)
        emit(
            {
                "email": reset.email,
                "sessionsEnded": reset.sessions_ended,
                "grantsRevoked": reset.grants_revoked,
            }
        )

    run(act)


ACCOUNT_COMMANDS = (
    list_accounts,
    disable_account,
    enable_account,
    reset_authenticator,
    reset_password,
)
