"""The options the buyer's commands share: where the service is, which key, how to pay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from paysign.client.answers import DEFAULT_MAX_ANSWER_BYTES
from paysign.client.signer import API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL
from paysign.client.wire import parse_usdc

F = TypeVar("F", bound=Callable[..., Any])
MIB = 1024 * 1024


def service_options(func: F) -> F:
    func = click.option(
        "--base-url",
        envvar=BASE_URL_ENV,
        default=DEFAULT_BASE_URL,
        show_default=True,
        help=f"The paysign service [env {BASE_URL_ENV}].",
    )(func)
    return click.option(
        "--api-key",
        envvar=API_KEY_ENV,
        default=None,
        help=f"Your paysign API key [env {API_KEY_ENV}].",
    )(func)


def payment_options(func: F) -> F:
    func = click.option(
        "--max-answer-mib",
        type=click.IntRange(min=1),
        default=DEFAULT_MAX_ANSWER_BYTES // MIB,
        show_default=True,
        metavar="MIB",
        help="Read at most MIB mebibytes of the seller's paid answer (it is held in memory).",
    )(func)
    func = click.option(
        "--network",
        default=None,
        help="Network to pay on (default eip155:8453, or eip155:84532 with --sandbox).",
    )(func)
    func = click.option(
        "--max-usdc",
        default=None,
        metavar="AMOUNT",
        help="Refuse to pay more than AMOUNT USDC (checked before anything is signed).",
    )(func)
    return click.option(
        "--sandbox",
        is_flag=True,
        help="Pay on the testnet (X-Sandbox-Mode: true to paysign and the seller).",
    )(func)


def max_amount(max_usdc: str | None) -> int | None:
    if max_usdc is None:
        return None
    try:
        return parse_usdc(max_usdc)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-usdc") from None
