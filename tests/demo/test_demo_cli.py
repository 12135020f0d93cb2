"""The buyer's CLI against the demo's real sellers, as a person meets it: the catalog with its
inputs and URLs, honest words when a seller has no sandbox or when a live payment goes to a
seller that has one, errors that say what to do, and an answer that ends its line on a
terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from conftest import PAYSIGN
from paysign.cli import main

from .conftest import Buyer, DemoWorld, transfers

#: An exception's class name (CamelCase) where a person expects words.
CLASS_NAME = re.compile(r"\b(?:[A-Z][a-z]+){2,}\b")


@pytest.fixture(autouse=True)
def service_logs_off_stdout() -> Iterator[None]:
    """The service runs in this process: keep its log lines out of what CliRunner captures."""
    import structlog

    before = structlog.get_config()
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    yield
    structlog.configure(**before)


def run(world: DemoWorld, buyer: Buyer | None, *args: str) -> Result:
    env = {"PAYSIGN_BASE_URL": world.service, "PAYSIGN_API_KEY": buyer.api_key if buyer else ""}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_catalog_list_shows_inputs_and_the_url_to_call(demo_world: DemoWorld) -> None:
    result = run(demo_world, None, "catalog", "list")
    assert result.exit_code == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    assert "INPUTS" in result.stdout.splitlines()[0] and "URL" in result.stdout.splitlines()[0]
    quote = rows["market_quote"].split()
    assert "symbol*" in quote
    assert f"{demo_world.sellers}/market/v1/quote/{{symbol}}" in quote
    assert "X-Sandbox-Mode" not in rows["market_quote"]  # --sandbox says it
    assert "company*,limit" in rows["company_filings"].split()
    assert "text*,target*" in rows["translate_text"].split()
    assert "city*,units" in rows["weather_forecast"].split()
    assert "paysign call NAME key=value" in result.stderr


def test_a_sandbox_call_to_a_seller_without_one_says_so(
    demo_world: DemoWorld, buyer: Buyer, seller_without_sandbox: str
) -> None:
    result = run(demo_world, buyer, "pay", seller_without_sandbox + "?company=Acme", "--sandbox")
    assert result.exit_code == 4
    assert json.loads(result.stdout)["error"] == "sandbox_unavailable"  # the seller's own words
    assert "no payment needed" not in result.stderr
    assert "answered HTTP 400 before asking for a payment: nothing was paid" in result.stderr
    assert "may have no sandbox" in result.stderr
    assert transfers(demo_world, buyer.wallet) == []
    # A listing the catalog knows has no sandbox is refused before anything is sent:
    # tests/client/test_catalog.py. Every demo listing has one.
    listed = run(demo_world, buyer, "call", "company_filings", "company=Acme", "--sandbox")
    assert listed.exit_code == 0, listed.stderr
    assert json.loads(listed.stdout)["sandbox"] is True
    assert len(transfers(demo_world, buyer.wallet)) == 1


def test_a_live_payment_to_a_seller_with_a_sandbox_is_flagged(
    demo_world: DemoWorld, buyer: Buyer
) -> None:
    result = run(demo_world, buyer, "pay", demo_world.sellers + "/market/v1/quote/acme")
    assert "note: market_quote offers a sandbox, and this call pays live" in result.stderr
    # The demo settles nothing live: the seller refuses the payment, and the error says why
    # and what to do, in words.
    assert result.exit_code == 3, result.stderr
    assert "error: The seller did not accept the payment" in result.stderr
    assert "settlement_unavailable" in result.stderr
    assert "run the same command with --sandbox" in result.stderr
    assert not CLASS_NAME.search(result.stderr), result.stderr
    assert transfers(demo_world, buyer.wallet) == []

    called = run(demo_world, buyer, "call", "market_quote", "symbol=acme")
    assert "note: market_quote offers a sandbox" in called.stderr
    assert called.exit_code == 3 and "--sandbox" in called.stderr


def test_a_sandbox_payment_has_no_note(demo_world: DemoWorld, buyer: Buyer) -> None:
    result = run(demo_world, buyer, "call", "market_quote", "symbol=acme", "--sandbox")
    assert result.exit_code == 0, result.stderr
    assert "note:" not in result.stderr
    assert "paid 0.01 USDC on eip155:84532 (sandbox)" in result.stderr


def test_a_bad_key_says_what_to_check(demo_world: DemoWorld, buyer: Buyer) -> None:
    stranger = Buyer(buyer.email, "psk_not_a_key", buyer.wallet)
    url = demo_world.sellers + "/market/v1/quote/acme"
    result = run(demo_world, stranger, "pay", url, "--sandbox")
    assert result.exit_code == 1
    assert "error: Unauthorized" in result.stderr
    assert "Check the API key (--api-key or PAYSIGN_API_KEY)" in result.stderr
    assert transfers(demo_world, buyer.wallet) == []


def test_the_answer_ends_its_line_on_a_terminal_and_is_byte_exact_in_a_pipe(
    demo_world: DemoWorld, buyer: Buyer
) -> None:
    """The real ``paysign`` executable, its stdout a terminal (a pty), then a pipe."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env |= {"PAYSIGN_API_KEY": buyer.api_key, "PAYSIGN_BASE_URL": demo_world.service}
    command = [PAYSIGN, "call", "weather_forecast", "city=paris", "--sandbox"]
    piped = subprocess.run(command, env=env, capture_output=True, timeout=60, check=False)
    assert piped.returncode == 0, piped.stderr
    assert not piped.stdout.endswith(b"\n")  # the seller's bytes, nothing added
    json.loads(piped.stdout)

    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            command, env=env, stdout=terminal, stderr=subprocess.PIPE, timeout=60, check=False
        )
        os.close(terminal)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the pty's other end is closed: all was read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(controller)
    assert done.returncode == 0, done.stderr
    assert seen.endswith(b"\r\n")  # a terminal shows \n as \r\n
    json.loads(seen.replace(b"\r\n", b"\n"))
