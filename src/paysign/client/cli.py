"""The buyer's commands: ``paysign pay`` and ``paysign call`` (``paysign catalog list`` is
``catalog_cli``; what they print, ``cli_output``; their shared options, ``cli_options``).

The seller's answer goes to stdout, byte for byte (escaped on a terminal); everything else
(the spinner, the payment summary, notes, errors with what to do) goes to stderr, so
``paysign pay URL > out.json`` keeps only the answer. A live payment to a seller whose listing
offers a sandbox gets a note first.

Exit codes:

==  ==========================================================================================
0   done: the seller answered 2xx/3xx (after paying, or without needing a payment)
1   paysign refused to sign: the problem's title and detail are printed (policy, spend cap,
    unapproved seller, bad or missing API key, terms it cannot sign)
2   usage: a bad option, an unknown listing or a missing listing input
3   the payment was not completed: no USDC option on the network, a price above
    ``--max-usdc``, a 402 too large or too slow to read, or the seller did not accept the
    signed payment
4   the seller answered with an HTTP error (its body is still printed), or a paid answer
    larger than ``--max-answer-mib``
5   the seller or paysign could not be reached (after the retries the spec asks for)
==  ==========================================================================================

The API key and the service address come from ``--api-key``/``--base-url`` or
``PAYSIGN_API_KEY``/``PAYSIGN_BASE_URL``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from paysign.client.catalog import build_listing_request, find_listing
from paysign.client.catalog_cli import sandbox_note
from paysign.client.cli_options import MIB, max_amount, payment_options, service_options
from paysign.client.cli_output import deliver, escape, note, outcomes, stderr_console
from paysign.client.clients import PaysignClient
from paysign.client.signer import PaysignSigner

if TYPE_CHECKING:
    from rich.console import Console

#: Added to the error when a live payment was not accepted by a seller that has a sandbox.
LIVE_HINT = "This seller offers a sandbox: run the same command with --sandbox to use test USDC."


@contextlib.contextmanager
def _spinner(console: Console, message: str) -> Iterator[Callable[[str, str], None]]:
    """A spinner on a terminal (nothing otherwise); yields the PaysignAuth event hook."""
    if not console.is_terminal:
        yield lambda kind, text: None
        return
    with console.status(message) as status:
        yield lambda kind, text: status.update(f"{escape(text)}…")


def _client(
    api_key: str | None,
    base_url: str,
    sandbox: bool,
    network: str | None,
    max_usdc: str | None,
    on_event: Callable[[str, str], None],
    timeout: float,
    max_answer_mib: int,
) -> PaysignClient:
    try:
        return PaysignClient(
            signer=PaysignSigner(api_key, base_url),
            sandbox=sandbox,
            network=network,
            max_amount=max_amount(max_usdc),
            on_event=on_event,
            timeout=timeout,
            max_answer_bytes=max_answer_mib * MIB,
        )
    except ValueError as exc:  # an unknown --network
        raise click.BadParameter(str(exc), param_hint="--network") from None


def _read_data(data: str) -> bytes:
    if data == "@-":
        return sys.stdin.buffer.read()
    if data.startswith("@"):
        with open(data[1:], "rb") as handle:
            return handle.read()
    return data.encode()


def _parse_headers(values: tuple[str, ...]) -> list[tuple[str, str]]:
    headers = []
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"{value!r} is not 'Name: value'", param_hint="-H")
        headers.append((name.strip(), content.strip()))
    return headers


@click.command("pay")
@click.argument("url")
@click.option("-X", "--request", "method", default=None, help="HTTP method (default GET).")
@click.option("-H", "--header", "header", multiple=True, help="'Name: value'; repeatable.")
@click.option(
    "-d", "--data", default=None, help="Request body (POST by default); @FILE or @- for stdin."
)
@payment_options
@service_options
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per call.")
def pay(
    url: str,
    method: str | None,
    header: tuple[str, ...],
    data: str | None,
    sandbox: bool,
    max_usdc: str | None,
    network: str | None,
    max_answer_mib: int,
    api_key: str | None,
    base_url: str,
    timeout: float,
) -> None:
    """Call URL and pay its x402 price through paysign; print the seller's answer.

    The answer goes to stdout; the payment (amount, network, transaction) to stderr.
    """
    console = stderr_console()
    headers = _parse_headers(header)
    body = _read_data(data) if data is not None else None
    if body is not None and not any(k.lower() == "content-type" for k, _ in headers):
        try:
            json.loads(body)
            headers.append(("Content-Type", "application/json"))
        except ValueError:
            headers.append(("Content-Type", "application/x-www-form-urlencoded"))
    verb = (method or ("POST" if body is not None else "GET")).upper()
    live_hints: list[str] = []
    with (
        outcomes(console, live_hints=live_hints),
        _spinner(console, f"calling {url}…") as on_event,
        _client(
            api_key, base_url, sandbox, network, max_usdc, on_event, timeout, max_answer_mib
        ) as http,
    ):
        if not sandbox and (text := sandbox_note(http.signer, url)):
            note(console, text)
            live_hints.append(LIVE_HINT)
        response = http.request(verb, url, headers=headers, content=body)
    deliver(console, response, sandbox=sandbox)


def _parse_params(values: tuple[str, ...]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for value in values:
        key, sep, text = value.partition("=")
        if key.endswith(":"):  # key:=json
            key = key[:-1]
            try:
                parsed: Any = json.loads(text)
            except ValueError:
                raise click.BadParameter(f"{value!r}: not JSON after ':='") from None
        else:
            parsed = text
        if not sep or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE (or KEY:=JSON)")
        params[key] = parsed
    return params


@click.command("call")
@click.argument("name")
@click.argument("params", nargs=-1, metavar="[KEY=VALUE | KEY:=JSON]...")
@payment_options
@service_options
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per call.")
def call(
    name: str,
    params: tuple[str, ...],
    sandbox: bool,
    max_usdc: str | None,
    network: str | None,
    max_answer_mib: int,
    api_key: str | None,
    base_url: str,
    timeout: float,
) -> None:
    """Call the catalog listing NAME with its inputs, paying through paysign.

    Inputs are KEY=VALUE (a string) or KEY:=JSON; each goes where the listing says (path,
    query, header or body). The answer goes to stdout, the payment to stderr.
    """
    console = stderr_console()
    values = _parse_params(params)
    live_hints: list[str] = []
    with (
        outcomes(console, live_hints=live_hints),
        _spinner(console, f"calling {name}…") as on_event,
        _client(
            api_key, base_url, sandbox, network, max_usdc, on_event, timeout, max_answer_mib
        ) as http,
    ):
        listing = find_listing(http.signer.catalog(), name)
        request = build_listing_request(listing, values, sandbox=sandbox)
        if not sandbox and listing.sandbox_available:
            note(
                console,
                f"{name} offers a sandbox, and this call pays live, in real USDC. "
                "Add --sandbox to pay with test USDC instead.",
            )
            live_hints.append(LIVE_HINT)
        response = http.request(
            request.method,
            request.url,
            params=request.query,
            headers=request.headers,
            json=request.body,
        )
    deliver(console, response, sandbox=sandbox)
