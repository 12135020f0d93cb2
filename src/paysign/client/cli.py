"""The buyer's commands: ``paysign pay``, ``paysign call`` and ``paysign catalog list``.

The seller's answer goes to stdout, byte for byte; everything else (the spinner, the payment
summary, errors) goes to stderr, so ``paysign pay URL > out.json`` keeps only the answer.

Exit codes:

==  ==========================================================================================
0   done: the seller answered 2xx/3xx (after paying, or without needing a payment)
1   paysign refused to sign: the problem's title and detail are printed (policy, spend cap,
    unapproved seller, bad or missing API key, terms it cannot sign)
2   usage: a bad option, an unknown listing or a missing listing input
3   the payment was not completed: no USDC option on the network, a price above
    ``--max-usdc``, or the seller did not accept the signed payment
4   the seller answered with an HTTP error (its body is still printed)
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
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import httpx

from paysign.client.auth import payment_of
from paysign.client.catalog import build_listing_request, filter_listings, find_listing, listings_of
from paysign.client.clients import PaysignClient
from paysign.client.errors import (
    ListingError,
    PaymentError,
    PaysignClientError,
    PaysignProblem,
    SellerUnreachable,
    SigningUnavailable,
)
from paysign.client.payment import Payment
from paysign.client.signer import API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL, PaysignSigner
from paysign.client.wire import format_usdc, parse_usdc

if TYPE_CHECKING:
    from rich.console import Console

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_NOT_PAID = 3
EXIT_SELLER_ERROR = 4
EXIT_UNREACHABLE = 5

F = TypeVar("F", bound=Callable[..., Any])


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _fail(console: Console, code: int, title: str, detail: str = "") -> NoReturn:
    console.print(f"[bold red]error:[/] {_escape(title)}")
    if detail:
        console.print(f"  {_escape(detail)}")
    sys.exit(code)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _service_options(func: F) -> F:
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


def _payment_options(func: F) -> F:
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


def _max_amount(max_usdc: str | None) -> int | None:
    if max_usdc is None:
        return None
    try:
        return parse_usdc(max_usdc)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-usdc") from None


@contextlib.contextmanager
def _spinner(console: Console, message: str) -> Iterator[Callable[[str, str], None]]:
    """A spinner on a terminal (nothing otherwise); yields the PaysignAuth event hook."""
    if not console.is_terminal:
        yield lambda kind, text: None
        return
    with console.status(message) as status:
        yield lambda kind, text: status.update(f"{_escape(text)}…")


@contextlib.contextmanager
def _outcomes(console: Console) -> Iterator[None]:
    """Turn the client's exceptions into a message on stderr and the exit code."""
    try:
        yield
    except PaysignProblem as exc:
        _fail(console, EXIT_REFUSED, exc.title, exc.detail)
    except (SigningUnavailable, SellerUnreachable) as exc:
        _fail(console, EXIT_UNREACHABLE, type(exc).__name__, str(exc))
    except PaymentError as exc:
        _fail(console, EXIT_NOT_PAID, type(exc).__name__, str(exc))
    except ListingError as exc:
        _fail(console, EXIT_USAGE, str(exc))
    except PaysignClientError as exc:
        _fail(console, EXIT_NOT_PAID, type(exc).__name__, str(exc))
    except httpx.TransportError as exc:
        _fail(console, EXIT_UNREACHABLE, f"could not reach {_where(exc)}", str(exc) or repr(exc))


def _where(exc: httpx.TransportError) -> str:
    try:
        return str(exc.request.url)
    except RuntimeError:
        return "the server"


def _summary(console: Console, response: httpx.Response, payment: Payment | None) -> None:
    status = f"HTTP {response.status_code}"
    if payment is None:
        console.print(f"no payment needed ({status})")
        return
    mode = "sandbox" if payment.sandbox else "live"
    console.print(
        f"[bold green]paid[/] {payment.usdc} USDC on {payment.network} ({mode}) → {status}"
    )
    rows = [
        ("seller", payment.seller_url),
        ("pay to", payment.pay_to),
        ("amount", f"{payment.amount} base units"),
        ("transaction", payment.transaction or "(the seller sent no settlement receipt)"),
        ("nonce", payment.nonce),
    ]
    if payment.attempts > 1:
        rows.append(("attempts", f"{payment.attempts} (same signature)"))
    for label, value in rows:
        console.print(f"  {label:<12} {_escape(value)}")


def _deliver(console: Console, response: httpx.Response) -> None:
    """The answer to stdout, the summary to stderr, and the exit code."""
    sys.stdout.flush()
    sys.stdout.buffer.write(response.content)
    if sys.stdout.isatty() and not response.content.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")  # keep the summary off the answer's last line
    sys.stdout.buffer.flush()
    _summary(console, response, payment_of(response))
    if response.status_code >= 400:
        sys.exit(EXIT_SELLER_ERROR)


def _client(
    api_key: str | None,
    base_url: str,
    sandbox: bool,
    network: str | None,
    max_usdc: str | None,
    on_event: Callable[[str, str], None],
    timeout: float,
) -> PaysignClient:
    try:
        return PaysignClient(
            signer=PaysignSigner(api_key, base_url),
            sandbox=sandbox,
            network=network,
            max_amount=_max_amount(max_usdc),
            on_event=on_event,
            timeout=timeout,
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
@_payment_options
@_service_options
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per call.")
def pay(
    url: str,
    method: str | None,
    header: tuple[str, ...],
    data: str | None,
    sandbox: bool,
    max_usdc: str | None,
    network: str | None,
    api_key: str | None,
    base_url: str,
    timeout: float,
) -> None:
    """Call URL and pay its x402 price through paysign; print the seller's answer.

    The answer goes to stdout; the payment (amount, network, transaction) to stderr.
    """
    console = _stderr()
    headers = _parse_headers(header)
    body = _read_data(data) if data is not None else None
    if body is not None and not any(k.lower() == "content-type" for k, _ in headers):
        try:
            json.loads(body)
            headers.append(("Content-Type", "application/json"))
        except ValueError:
            headers.append(("Content-Type", "application/x-www-form-urlencoded"))
    verb = (method or ("POST" if body is not None else "GET")).upper()
    with (
        _outcomes(console),
        _spinner(console, f"calling {url}…") as on_event,
        _client(api_key, base_url, sandbox, network, max_usdc, on_event, timeout) as http,
    ):
        response = http.request(verb, url, headers=headers, content=body)
    _deliver(console, response)


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
@_payment_options
@_service_options
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per call.")
def call(
    name: str,
    params: tuple[str, ...],
    sandbox: bool,
    max_usdc: str | None,
    network: str | None,
    api_key: str | None,
    base_url: str,
    timeout: float,
) -> None:
    """Call the catalog listing NAME with its inputs, paying through paysign.

    Inputs are KEY=VALUE (a string) or KEY:=JSON; each goes where the listing says (path,
    query, header or body). The answer goes to stdout, the payment to stderr.
    """
    console = _stderr()
    values = _parse_params(params)
    with (
        _outcomes(console),
        _spinner(console, f"calling {name}…") as on_event,
        _client(api_key, base_url, sandbox, network, max_usdc, on_event, timeout) as http,
    ):
        listing = find_listing(http.signer.catalog(), name)
        request = build_listing_request(listing, values, sandbox=sandbox)
        response = http.request(
            request.method,
            request.url,
            params=request.query,
            headers=request.headers,
            json=request.body,
        )
    _deliver(console, response)


@click.command("list")
@click.option(
    "--tier", type=click.Choice(["PREMIUM", "STANDARD"], case_sensitive=False), default=None
)
@click.option("--tag", "tags", multiple=True, help="Only listings with this tag; repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print the listings as a JSON array.")
@_service_options
def catalog_list(
    tier: str | None, tags: tuple[str, ...], as_json: bool, api_key: str | None, base_url: str
) -> None:
    """List the catalog's paid services (Premium and Standard), from the paysign service."""
    from rich.console import Console
    from rich.table import Table

    console = _stderr()
    with _outcomes(console), PaysignSigner(api_key, base_url) as signer:
        found = filter_listings(listings_of(signer.catalog()), tier=tier, tags=tags)
    if as_json:
        click.echo(json.dumps([listing.document for listing in found], indent=2))
        return
    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=200)
    if not found:
        console.print("no listing matches")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("NAME", "TIER", "USDC", "METHOD", "SANDBOX", "TAGS", "DESCRIPTION"):
        table.add_column(column, justify="right" if column == "USDC" else "left")
    for listing in found:
        table.add_row(
            listing.name,
            listing.tier,
            format_usdc(listing.price),
            listing.method,
            "yes" if listing.sandbox_available else "no",
            ",".join(listing.tags),
            listing.description,
        )
    out.print(table)
