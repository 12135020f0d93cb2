"""What the buyer's commands print: the seller's answer on stdout, byte for byte (on a
terminal: its control characters shown escaped, and a final newline added); the payment
summary, notes and errors on stderr, in words a person reads (what happened, then what to do),
never an exception's class name.

Much of what is printed comes from the seller (its receipt, its reasons, its payTo, the URL it
redirected to): every text goes through :func:`escape`, so none of it can reach the terminal
as a control sequence (move the cursor and rewrite the summary above, set the window title,
write the clipboard) or reorder what follows it (bidi controls).
"""

from __future__ import annotations

import contextlib
import sys
import unicodedata
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
    AnswerLimitExceeded,
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


#: Unicode categories never printed as they are: controls (C0, C1 with ESC and CSI), format
#: characters (bidi overrides, zero-width ones), lone surrogates, and the line and paragraph
#: separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(text: str, *, keep: str = "") -> str:
    """``text`` with every control or invisible formatting character (but those in ``keep``)
    shown as its escape: ``\\x1b``, ``\\u202e``.

    >>> printable("0xab\\x1b]0;title\\x07\\u202eok")
    '0xab\\\\x1b]0;title\\\\x07\\\\u202eok'
    """
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        _escaped(char)
        if char not in keep and unicodedata.category(char) in _HIDDEN_CATEGORIES
        else char
        for char in text
    )


def _escaped(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape(text: str) -> str:
    """``text`` safe to print on the console: control characters escaped, then rich markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(printable(text))


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
    except AnswerLimitExceeded as exc:
        _fail_with(console, EXIT_NOT_PAID if exc.payment is None else EXIT_SELLER_ERROR, exc)
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
        f"[bold green]paid[/] {payment.usdc} USDC on {escape(payment.network)} ({mode}) → {status}"
    )
    rows = [
        ("seller", payment.seller_url),
        ("pay to", payment.pay_to),
        ("amount", f"{payment.amount} base units"),
        ("transaction", payment.transaction or _no_transaction(payment)),
        ("nonce", payment.nonce),
    ]
    if payment.attempts > 1:
        rows.append(("attempts", f"{payment.attempts} (same signature)"))
    for label, value in rows:
        console.print(f"  {label:<12} {escape(value)}")


def _no_transaction(payment: Payment) -> str:
    if payment.settlement is None:
        return "(the seller sent no settlement receipt)"
    return "(the seller's receipt names no transaction hash)"


def deliver(console: Console, response: httpx.Response, *, sandbox: bool) -> None:
    """The answer to stdout, the summary to stderr, and the exit code."""
    sys.stdout.flush()
    if sys.stdout.isatty():
        sys.stdout.buffer.write(for_terminal(response.content))
    else:
        sys.stdout.buffer.write(response.content)
    sys.stdout.buffer.flush()
    summary(console, response, payment_of(response), sandbox=sandbox)
    if response.status_code >= 400:
        sys.exit(EXIT_SELLER_ERROR)


def for_terminal(answer: bytes) -> bytes:
    """The seller's answer as a person's terminal shows it: lines and tabs kept, every other
    control character and any byte that is not UTF-8 escaped, and a final newline so the shell
    prompt and the summary start on a line of their own. Redirected, the answer is written
    as it came."""
    text = answer.decode("utf-8", errors="backslashreplace").replace("\r\n", "\n")
    text = printable(text, keep="\n\t")
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")
