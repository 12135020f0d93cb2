"""The wallet's status as the buyer SDK and ``paysign status`` read it over HTTP: the room left
under each cap after a live signature, a sandbox payment that counts against none, the
approvals queue, the exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from conftest import signature_body
from paysign.cli import main
from paysign.client import PaysignClient, PaysignSigner, Unauthorized, WalletStatus
from paysign.services import policy

from .conftest import Buyer, Sellers

pytestmark = pytest.mark.usefixtures("service_logs_off_stdout")

LIVE_AMOUNT = 250_000
UNVETTED = "https://unvetted.example.com/v1/data"


def cli(buyer: Buyer, *args: str, key: str | None = None) -> Result:
    env = {
        "PAYSIGN_API_KEY": buyer.api_key if key is None else key,
        "PAYSIGN_BASE_URL": buyer.service,
    }
    return CliRunner().invoke(main, ["status", *args], env=env, catch_exceptions=False)


def spend(buyer: Buyer, sellers: Sellers) -> None:
    """A live signature (reserved under the caps), a sandbox payment (never capped) and a
    refusal that puts a new seller in the approvals queue."""
    with PaysignClient(buyer.api_key, paysign_url=buyer.service, sandbox=True) as http:
        assert http.get(sellers.url + "/v2/weather/oslo").status_code == 200
    with PaysignSigner(buyer.api_key, buyer.service) as signer:
        live = signature_body(
            network="eip155:8453", amount=str(LIVE_AMOUNT), seller_url=sellers.url + "/v2/x"
        )
        signer.sign(live["sellerUrl"], live["paymentRequired"])  # type: ignore[arg-type]
        unvetted = signature_body(network="eip155:8453", seller_url=UNVETTED)
        with pytest.raises(Exception, match="approv"):
            signer.sign(UNVETTED, unvetted["paymentRequired"])  # type: ignore[arg-type]


def test_the_sdk_reads_what_is_left(buyer: Buyer, sellers: Sellers) -> None:
    spend(buyer, sellers)
    with PaysignSigner(buyer.api_key, buyer.service) as signer:
        status = signer.status(seller=UNVETTED)
    assert isinstance(status, WalletStatus)
    daily = status.cap("daily")
    assert daily is not None and daily.spent == LIVE_AMOUNT
    assert daily.limit is not None and daily.remaining == daily.limit - LIVE_AMOUNT
    assert daily.resets_at is not None and daily.resets_at.endswith("T00:00:00Z")
    per_payment = status.cap("perPayment")
    assert per_payment is not None and per_payment.resets_at is None
    assert status.pending_total == 1
    assert status.pending_sellers == ["unvetted.example.com/v1/data"]
    assert status.seller_pending is True
    assert status.api_key_expires_at is not None
    # This service has no sandbox chain attached (tests/connector reads a real balance).
    assert status.sandbox_balance is None
    with PaysignClient(buyer.api_key, paysign_url=buyer.service) as http:
        assert http.status().cap("daily") == daily


def budget_the_sellers(buyer: Buyer) -> None:
    """An hourly cap, and a daily budget of 1 USDC on the sellers' /v2 paths."""
    document = policy.get_policy(buyer.runtime.db, email=buyer.email)
    document["caps"]["hourly"] = 2_000_000
    document["allow"] = [*document["allow"], {"seller": "127.0.0.1/v2", "daily": 1_000_000}]
    policy.set_policy(buyer.runtime.db, buyer.runtime.clock, email=buyer.email, document=document)


def test_the_sdk_reads_the_hour_and_the_sellers_budget(buyer: Buyer, sellers: Sellers) -> None:
    budget_the_sellers(buyer)
    spend(buyer, sellers)
    with PaysignSigner(buyer.api_key, buyer.service) as signer:
        status = signer.status()
    hourly = status.cap("hourly")
    assert hourly is not None and (hourly.spent, hourly.remaining) == (LIVE_AMOUNT, 1_750_000)
    assert status.budgeted_rules == 1
    (budget,) = status.seller_budgets
    assert (budget.rule, budget.cap, budget.limit) == ("127.0.0.1/v2", "daily", 1_000_000)
    assert (budget.spent, budget.remaining) == (LIVE_AMOUNT, 750_000)
    assert budget.resets_at is not None and budget.resets_at.endswith("T00:00:00Z")

    result = cli(buyer)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Budgets of allow rules (1):" in lines
    shown = next(line for line in lines if line.startswith("  127.0.0.1/v2 daily:"))
    assert "0.75 USDC left of 1 USDC (0.25 USDC spent), resets " in shown
    hour_line = next(line for line in lines if line.strip().startswith("hourly"))
    assert "1.75 USDC left of 2 USDC (0.25 USDC spent)" in hour_line


def test_a_bad_key_is_unauthorized(buyer: Buyer) -> None:
    with (
        PaysignSigner("psk_" + "x" * 43, buyer.service) as signer,
        pytest.raises(Unauthorized),
    ):
        signer.status()


def test_paysign_status_prints_the_room_left(buyer: Buyer, sellers: Sellers) -> None:
    spend(buyer, sellers)
    result = cli(buyer, "--seller", UNVETTED)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    daily = next(line for line in lines if line.strip().startswith("daily"))
    assert "9.75 USDC left of 10 USDC (0.25 USDC spent), resets " in daily
    assert "  unvetted.example.com/v1/data" in lines
    assert f"The seller {UNVETTED} waits for approval." in lines
    assert result.stdout.endswith("\n")
    assert not any(line.startswith("Budgets of allow rules") for line in lines)

    as_json = cli(buyer, "--json")
    assert as_json.exit_code == 0
    document = json.loads(as_json.stdout)
    assert {c["cap"]: c for c in document["caps"]}["daily"]["spentUsdc"] == "0.25"


def test_paysign_status_exit_codes(buyer: Buyer) -> None:
    refused = cli(buyer, key="psk_" + "x" * 43)
    assert refused.exit_code == 1 and refused.stdout == ""
    assert "error:" in refused.stderr
    env = {"PAYSIGN_API_KEY": buyer.api_key, "PAYSIGN_BASE_URL": "http://127.0.0.1:9"}
    unreachable = CliRunner().invoke(main, ["status"], env=env, catch_exceptions=False)
    assert unreachable.exit_code == 5 and "could not reach" in unreachable.stderr
