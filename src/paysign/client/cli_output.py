"""What the buyer's commands print: the seller's answer on stdout, byte for byte (with a final
newline added only on a terminal); the payment summary, notes and errors on stderr, in words a
person reads (what happened, then what to do), never an exception's class name."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NoReturn

import httpx

from paysign.client.auth import payment_of
from paysign.client.errors import (
    ListingError,
    PaysignClientError,
    PaysignProblem,
    SigningUnavailable,
)
from paysign.client.payment import Payment
from paysign.client.payment_errors import (
    PaymentError,
    PaymentRejected,
    SellerUnreachable,
)

if TYPE_CHECKING:
    from rich.console import Console

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_NOT_PAID = 3
EXIT_SELLER_ERROR = 4
EXIT_UNREACHABLE = 5


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def fail(console: Console, code: int, title: str, detail: str = "", remedy: str = "") -> NoReturn:
    console.print(f"[bold red]error:[/] {escape(title)}")
    for line in (detail, remedy):
        if line and line != title:
            console.print(f"  {escape(line)}")
    sys.exit(code)


def note(console: Console, text: str) -> None:
    console.print(f"[bold yellow]note:[/] {escape(text)}")


@contextlib.contextmanager
def outcomes(console: Console, *, live_hints: Sequence[str] = ()) -> Iterator[None]:
    """Turn the client's exceptions into a message on stderr and the exit code. ``live_hints``
    (filled in as the command learns them) follow the error when a live payment was not
    accepted."""
    try:
        yield
    except PaysignProblem as exc:
        _fail_with(console, EXIT_REFUSED, exc)
    except (SigningUnavailable, SellerUnreachable) as exc:
        _fail_with(console, EXIT_UNREACHABLE, exc)
    except PaymentRejected as exc:
        hints = [] if exc.payment.sandbox else list(live_hints)
        fail(console, EXIT_NOT_PAID, exc.title, str(exc), " ".join([exc.remedy, *hints]))
    except ListingError as exc:
        _fail_with(console, EXIT_USAGE, exc)
    except (PaymentError, PaysignClientError) as exc:
        _fail_with(console, EXIT_NOT_PAID, exc)
    except httpx.TransportError as exc:
        fail(
            console,
            EXIT_UNREACHABLE,
            f"Could not reach {_where(exc)}",
            str(exc) or repr(exc),
            "Nothing was paid. Check the address and your network, then try again.",
        )


def _fail_with(console: Console, code: int, exc: PaysignClientError) -> NoReturn:
    detail = exc.detail if isinstance(exc, PaysignProblem) else str(exc)
    fail(console, code, exc.title, detail, exc.remedy)


def _where(exc: httpx.TransportError) -> str:
    try:
        return str(exc.request.url)
    except RuntimeError:
        return "the server"


def summary(
    console: Console, response: httpx.Response, payment: Payment | None, *, sandbox: bool
) -> None:
    status = f"HTTP {response.status_code}"
    if payment is None:
        if response.status_code < 400:
            console.print(f"no payment needed ({status})")
            return
        console.print(f"the seller answered {status} before asking for a payment: nothing was paid")
        if sandbox:
            console.print(
                "  It may have no sandbox: `paysign catalog list` shows which listings have "
                "one; without --sandbox the call pays live, in real USDC."
            )
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
        console.print(f"  {label:<12} {escape(value)}")


def deliver(console: Console, response: httpx.Response, *, sandbox: bool) -> None:
    """The answer to stdout, the summary to stderr, and the exit code."""
    sys.stdout.flush()
    sys.stdout.buffer.write(response.content)
    if sys.stdout.isatty() and not response.content.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")  # the shell prompt and the summary start on a new line
    sys.stdout.buffer.flush()
    summary(console, response, payment_of(response), sandbox=sandbox)
    if response.status_code >= 400:
        sys.exit(EXIT_SELLER_ERROR)
