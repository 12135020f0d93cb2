"""``paysign pay``: the seller's answer on stdout, the payment on stderr, the exit code saying
what happened (0 done, 1 paysign refused, 2 usage, 3 not paid, 4 seller error, 5 unreachable)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from click.testing import CliRunner, Result

from conftest import PAYSIGN, free_port
from paysign.cli import main

from .conftest import PRICES, Buyer, Sellers, weather_answer

pytestmark = pytest.mark.usefixtures("service_logs_off_stdout")


def run(buyer: Buyer, *args: str, key: str | None = None, stdin: bytes | None = None) -> Result:
    env = {
        "PAYSIGN_API_KEY": buyer.api_key if key is None else key,
        "PAYSIGN_BASE_URL": buyer.service,
    }
    return CliRunner().invoke(main, list(args), env=env, input=stdin, catch_exceptions=False)


def test_pay_prints_the_answer_on_stdout_and_the_payment_on_stderr(
    buyer: Buyer, sellers: Sellers
) -> None:
    result = run(buyer, "pay", sellers.url + "/v2/weather/paris", "--sandbox")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout_bytes) == {**weather_answer("paris"), "sandbox": "true"}
    (transfer,) = buyer.transfers()
    assert "paid 0.01 USDC on eip155:84532 (sandbox) → HTTP 200" in result.stderr
    assert transfer["transactionHash"] in result.stderr
    assert sellers.pay_to in result.stderr
    assert "paid" not in result.stdout and transfer["transactionHash"] not in result.stdout
    assert int(transfer["data"], 16) == PRICES["weather"]


def test_pay_posts_data_with_headers(buyer: Buyer, sellers: Sellers, tmp_path) -> None:
    body = tmp_path / "body.json"
    body.write_text('{"ask": "echo"}')
    result = run(
        buyer, "pay", sellers.url + "/v2/echo", "-d", f"@{body}", "-H", "X-Trace: 1", "--sandbox"
    )

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"echo": {"ask": "echo"}, "sandbox": "true"}
    assert "paid 0.002 USDC" in result.stderr


def test_pay_reads_the_body_from_stdin(buyer: Buyer, sellers: Sellers) -> None:
    result = run(
        buyer,
        "pay",
        "-X",
        "post",
        sellers.url + "/v2/echo",
        "-d",
        "@-",
        "--sandbox",
        stdin=b'{"from": "stdin"}',
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["echo"] == {"from": "stdin"}


def test_a_free_url_needs_no_payment(buyer: Buyer, sellers: Sellers) -> None:
    result = run(buyer, "pay", sellers.url + "/free")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"free": True}
    assert "no payment needed (HTTP 200)" in result.stderr
    assert buyer.ledger() == []


def test_a_refusal_exits_1_with_the_problem_title(buyer: Buyer, sellers: Sellers) -> None:
    url = sellers.url.replace("127.0.0.1", "localhost") + "/v2/weather/bern"
    result = run(buyer, "pay", url, "--sandbox")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert "error: Seller approval pending" in result.stderr
    assert "localhost" in result.stderr
    assert re.search(r"what to do: http\S+/problems/allow-pending", result.stderr)


def test_a_spend_cap_refusal_names_the_cap(buyer: Buyer, sellers: Sellers) -> None:
    result = run(buyer, "pay", sellers.url + "/v2/mixed")  # live: 2 USDC on mainnet
    assert result.exit_code == 1
    assert "error: Spend cap exceeded" in result.stderr
    assert "perPayment" in result.stderr


def test_a_bad_key_exits_1_unauthorized(buyer: Buyer, sellers: Sellers) -> None:
    result = run(buyer, "pay", sellers.url + "/v2/weather/paris", "--sandbox", key="psk_bad")
    assert result.exit_code == 1
    assert "error: Unauthorized" in result.stderr


def test_a_price_over_max_usdc_exits_3_unsigned(buyer: Buyer, sellers: Sellers) -> None:
    result = run(buyer, "pay", sellers.url + "/v2/expensive", "--sandbox", "--max-usdc", "0.5")
    assert result.exit_code == 3
    assert "error: The price is above your limit" in result.stderr and "5 USDC" in result.stderr
    assert "Raise the limit (--max-usdc)" in result.stderr
    assert "PriceExceedsLimit" not in result.stderr
    assert result.stdout == ""
    assert buyer.ledger() == []


@pytest.mark.parametrize(
    "args",
    [
        ["--max-usdc", "abc"],
        ["--max-usdc", "0.0000001"],
        ["--network", "eip155:1"],
        ["-H", "no colon"],
    ],
)
def test_bad_options_exit_2(buyer: Buyer, sellers: Sellers, args: list[str]) -> None:
    result = run(buyer, "pay", sellers.url + "/v2/weather/paris", *args)
    assert result.exit_code == 2
    assert buyer.ledger() == []


def test_a_seller_error_exits_4_with_its_body(buyer: Buyer, sellers: Sellers) -> None:
    result = run(buyer, "pay", sellers.url + "/no-such-path")
    assert result.exit_code == 4
    assert json.loads(result.stdout) == {"detail": "Not Found"}
    assert "answered HTTP 404 before asking for a payment: nothing was paid" in result.stderr
    assert "no payment needed" not in result.stderr


def test_an_unreachable_seller_exits_5(buyer: Buyer) -> None:
    result = run(buyer, "pay", f"http://127.0.0.1:{free_port()}/x")
    assert result.exit_code == 5
    assert "error: Could not reach" in result.stderr and "Nothing was paid" in result.stderr


def test_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"paysign {version('paysign')}\n"


def test_an_unreachable_service_says_what_to_check(buyer: Buyer, sellers: Sellers) -> None:
    result = CliRunner().invoke(
        main,
        ["pay", sellers.url + "/v2/weather/paris", "--sandbox"],
        env={
            "PAYSIGN_API_KEY": buyer.api_key,
            "PAYSIGN_BASE_URL": f"http://127.0.0.1:{free_port()}",
        },
    )
    assert result.exit_code == 5, result.stderr
    assert "error: paysign could not be reached" in result.stderr
    assert "PAYSIGN_BASE_URL" in result.stderr and "Nothing was signed" in result.stderr
    assert "SigningUnavailable" not in result.stderr


def test_the_installed_command(buyer: Buyer, sellers: Sellers) -> None:
    """The real ``paysign`` executable, in its own process, with the key in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env |= {"PAYSIGN_API_KEY": buyer.api_key, "PAYSIGN_BASE_URL": buyer.service}
    url = sellers.url + "/v2/weather/tokyo"
    paid = subprocess.run(
        [PAYSIGN, "pay", url, "--sandbox", "--max-usdc", "0.02"],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert paid.returncode == 0, paid.stderr
    assert json.loads(paid.stdout) == {**weather_answer("tokyo"), "sandbox": "true"}
    assert b"paid 0.01 USDC" in paid.stderr

    del env["PAYSIGN_API_KEY"]
    refused = subprocess.run(
        [PAYSIGN, "pay", url, "--sandbox"], env=env, capture_output=True, timeout=60, check=False
    )
    assert refused.returncode == 1
    assert refused.stdout == b""
    assert b"error: Unauthorized" in refused.stderr and b"PAYSIGN_API_KEY" in refused.stderr
    assert len(buyer.transfers()) == 1
