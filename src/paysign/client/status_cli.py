"""``paysign status``: what the wallet can still spend, read over the API with the API key.

Each cap's room and when its window resets (the hour's when an hourly cap is set), the room
under each allow rule's own budget, whether spending is frozen, the sellers waiting for
the account holder's approval (``--seller URL``: and whether that one is among them), the
sandbox balance and the API key's expiry. ``--json`` prints the service's answer as it came.

Exit codes: 0 read; 1 paysign refused (a missing, invalid or expired key, a malformed
``--seller``); 5 paysign could not be reached.
"""

from __future__ import annotations

import json
import sys
from typing import NoReturn

import click

from paysign.client.errors import PaysignProblem, SigningUnavailable, Unauthorized
from paysign.client.signer import API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL, PaysignSigner
from paysign.client.status import WalletStatus
from paysign.client.wire import format_usdc

EXIT_REFUSED = 1
EXIT_UNREACHABLE = 5


def _usdc(amount: int | None) -> str:
    return "no cap" if amount is None else f"{format_usdc(amount)} USDC"


def _fail(code: int, title: str, detail: str) -> NoReturn:
    click.echo(f"error: {title}", err=True)
    if detail:
        click.echo(f"  {detail}", err=True)
    sys.exit(code)


def status_lines(status: WalletStatus, seller: str | None) -> list[str]:
    """The status as a person reads it."""
    lines = ["Live spending (USDC on Base):"]
    if status.frozen:
        lines.append("  FROZEN: every payment is refused until the account holder unfreezes it")
    for cap in status.caps:
        if cap.resets_at is None:
            lines.append(f"  {cap.cap:<12} at most {_usdc(cap.limit)} per payment")
        elif cap.limit is None:
            lines.append(f"  {cap.cap:<12} no cap ({_usdc(cap.spent)} spent)")
        else:
            lines.append(
                f"  {cap.cap:<12} {_usdc(cap.remaining)} left of {_usdc(cap.limit)} "
                f"({_usdc(cap.spent)} spent), resets {cap.resets_at}"
            )
    lines.append(f"  one payment may cost at most {_usdc(status.can_spend_now)} now")
    if status.budgeted_rules:
        lines.append(f"Budgets of allow rules ({status.budgeted_rules}):")
        for budget in status.seller_budgets:
            lines.append(
                f"  {budget.rule} {budget.cap}: {_usdc(budget.remaining)} left of "
                f"{_usdc(budget.limit)} ({_usdc(budget.spent)} spent), resets {budget.resets_at}"
            )
        unlisted = status.budgeted_rules - len({b.rule for b in status.seller_budgets})
        if unlisted > 0:
            lines.append(f"  and {unlisted} more (see the portal's policy page)")
    lines.append(f"Waiting for approval: {status.pending_total}")
    lines += [f"  {name}" for name in status.pending_sellers]
    if seller is not None:
        verdict = "waits for approval" if status.seller_pending else "is not waiting for approval"
        lines.append(f"The seller {seller} {verdict}.")
    balance = status.sandbox_balance
    shown = "unknown (no sandbox chain reachable)" if balance is None else _usdc(balance)
    lines.append(f"Sandbox balance (test USDC, never capped): {shown}")
    expiry = status.api_key_expires_at or "no active API key"
    lines.append(f"API key expires: {expiry}")
    return lines


@click.command("status")
@click.option(
    "--api-key", envvar=API_KEY_ENV, default=None, help=f"Your API key [env {API_KEY_ENV}]."
)
@click.option(
    "--base-url",
    envvar=BASE_URL_ENV,
    default=DEFAULT_BASE_URL,
    show_default=True,
    help=f"The paysign service [env {BASE_URL_ENV}].",
)
@click.option("--seller", default=None, metavar="URL", help="Also say whether URL waits.")
@click.option("--json", "as_json", is_flag=True, help="Print the service's JSON answer.")
def status(api_key: str | None, base_url: str, seller: str | None, as_json: bool) -> None:
    """What the wallet can still spend: caps, approvals, sandbox balance, key expiry."""
    try:
        with PaysignSigner(api_key, base_url) as signer:
            found = signer.status(seller=seller)
    except Unauthorized as exc:
        _fail(
            EXIT_REFUSED,
            exc.title,
            exc.detail
            or "the API key is missing, invalid, expired or revoked: get a new one "
            "in the paysign portal",
        )
    except PaysignProblem as exc:
        _fail(EXIT_REFUSED, exc.title, exc.detail)
    except SigningUnavailable as exc:
        _fail(EXIT_UNREACHABLE, f"could not reach paysign at {base_url}", str(exc))
    if as_json:
        click.echo(json.dumps(found.document, indent=2))
        return
    click.echo("\n".join(status_lines(found, seller)))
