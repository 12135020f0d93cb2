"""``paysign pay`` against a hostile seller (``hostile_seller.py``): nothing the seller sends
reaches the terminal as a control sequence, and no answer it sends is read without bound."""

from __future__ import annotations

import os
import pty
import select
import subprocess

import pytest
from click.testing import CliRunner, Result

from conftest import PAYSIGN
from paysign.cli import main
from paysign.client.cli_output import printable

from .conftest import Buyer, Sellers
from .hostile_seller import RAW_CONTROLS, TERMINAL_ATTACK

pytestmark = pytest.mark.usefixtures("service_logs_off_stdout")


def run(buyer: Buyer, *args: str) -> Result:
    env = {"PAYSIGN_API_KEY": buyer.api_key, "PAYSIGN_BASE_URL": buyer.service}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def assert_no_raw_controls(text: str) -> None:
    assert not [char for char in RAW_CONTROLS if char in text], repr(text)


def test_a_lying_receipt_does_not_reach_the_terminal(buyer: Buyer, sellers: Sellers) -> None:
    result = run(buyer, "pay", sellers.url + "/hostile/lying-receipt/weather/cairo", "--sandbox")

    assert result.exit_code == 0, result.stderr
    assert_no_raw_controls(result.stderr)
    assert "REWRITTEN BY SELLER" not in result.stderr
    assert "(the seller's receipt names no transaction hash)" in result.stderr
    assert result.stdout_bytes == TERMINAL_ATTACK.encode()  # not a terminal: the data as sent


def test_a_seller_reason_is_shown_escaped(buyer: Buyer, sellers: Sellers) -> None:
    result = run(buyer, "pay", sellers.url + "/hostile/rejecting/weather/cairo", "--sandbox")

    assert result.exit_code == 3, result.stderr
    assert "error: The seller did not accept the payment" in result.stderr
    assert_no_raw_controls(result.stderr)
    assert "\\x1b]52;c;" in result.stderr and "\\u202e" in result.stderr  # shown, inert


def test_an_endless_402_exits_3_unpaid(buyer: Buyer, sellers: Sellers) -> None:
    result = run(buyer, "pay", sellers.url + "/hostile/endless-402/weather/cairo", "--sandbox")

    assert result.exit_code == 3, result.stderr
    assert "error: The seller's payment request could not be read" in result.stderr
    assert "Nothing was signed" in result.stderr
    assert buyer.ledger() == []


def test_a_paid_answer_over_the_limit_exits_4_naming_the_transaction(
    buyer: Buyer, sellers: Sellers
) -> None:
    url = sellers.url + "/hostile/endless-paid/weather/cairo?bytes=3145728"
    result = run(buyer, "pay", url, "--sandbox", "--max-answer-mib", "2")

    assert result.exit_code == 4, result.stderr
    assert "more than 2097152 bytes" in result.stderr
    (transfer,) = buyer.transfers()
    assert transfer["transactionHash"] in result.stderr
    assert result.stdout_bytes == b""


def test_on_a_terminal_the_paid_answer_is_shown_escaped(buyer: Buyer, sellers: Sellers) -> None:
    """The installed command with its stdout on a pseudo-terminal, as a person runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env |= {"PAYSIGN_API_KEY": buyer.api_key, "PAYSIGN_BASE_URL": buyer.service}
    terminal, command_side = pty.openpty()
    with subprocess.Popen(
        [PAYSIGN, "pay", sellers.url + "/hostile/lying-receipt/weather/lagos", "--sandbox"],
        env=env,
        stdout=command_side,
        stderr=subprocess.PIPE,
    ) as command:
        os.close(command_side)
        shown = _read_all(terminal)
        _, stderr = command.communicate(timeout=60)
    os.close(terminal)

    assert command.returncode == 0, stderr
    assert_no_raw_controls(shown.decode())
    assert printable(TERMINAL_ATTACK) in shown.decode()
    assert_no_raw_controls(stderr.decode())


def _read_all(terminal: int) -> bytes:
    shown = b""
    while select.select([terminal], [], [], 60)[0]:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # the command exited and closed its side
            break
        if not chunk:
            break
        shown += chunk
    return shown
