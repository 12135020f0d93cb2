"""Listed services (spec 4.3): ``paysign catalog list``, ``paysign call NAME key=value …`` and
``call_listing``, against the catalog the service serves and sellers built with the x402 SDK."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from paysign.cli import main
from paysign.client import AsyncPaysignClient, ListingError, acall_listing, call_listing

from .conftest import PRICES, Buyer, Sellers

pytestmark = pytest.mark.usefixtures("catalog", "service_logs_off_stdout")


def run(buyer: Buyer, *args: str) -> Result:
    env = {"PAYSIGN_API_KEY": buyer.api_key, "PAYSIGN_BASE_URL": buyer.service}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def names(result: Result) -> set[str]:
    assert result.exit_code == 0, result.stderr
    return {line.split()[0] for line in result.stdout.splitlines()[1:] if line.strip()}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], {"test_quote", "test_translate", "test_filings"}),
        (["--tier", "standard"], {"test_translate"}),
        (["--tier", "PREMIUM"], {"test_quote", "test_filings"}),
        (["--tag", "finance"], {"test_quote", "test_filings"}),
        (["--tag", "finance", "--tag", "Filings"], {"test_filings"}),
        (["--tier", "standard", "--tag", "finance"], set()),
    ],
)
def test_catalog_list_filters_by_tier_and_tag(
    buyer: Buyer, args: list[str], expected: set[str]
) -> None:
    assert names(run(buyer, "catalog", "list", *args)) == expected


def test_catalog_list_shows_price_and_sandbox(buyer: Buyer) -> None:
    result = run(buyer, "catalog", "list", "--tag", "quote")
    header, row = result.stdout.splitlines()
    assert header.split()[:6] == ["NAME", "TIER", "USDC", "METHOD", "SANDBOX", "TAGS"]
    assert row.split()[:6] == ["test_quote", "PREMIUM", "0.01", "GET", "yes", "finance,quote"]


def test_catalog_list_as_json_needs_no_key(buyer: Buyer, catalog: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        main,
        ["catalog", "list", "--json", "--tier", "standard", "--base-url", buyer.service],
        env={"PAYSIGN_API_KEY": ""},
    )
    assert result.exit_code == 0, result.stderr
    (listing,) = json.loads(result.stdout)
    assert listing == catalog["catalog"][1]


def test_call_fills_the_path_and_query_and_pays(buyer: Buyer, sellers: Sellers) -> None:
    before = buyer.balance()
    result = run(buyer, "call", "test_quote", "symbol=ACME", "currency=EUR", "--sandbox")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "symbol": "ACME",
        "price": 123.45,
        "currency": "EUR",
        "sandbox": "true",
    }
    assert "paid 0.01 USDC on eip155:84532 (sandbox)" in result.stderr
    assert f"{sellers.url}/market/v1/quote/ACME?currency=EUR" in result.stderr
    (transfer,) = buyer.transfers()
    assert transfer["transactionHash"] in result.stderr
    assert buyer.balance() == before - PRICES["quote"]


def test_call_sends_the_body_of_a_post_listing(buyer: Buyer) -> None:
    result = run(buyer, "call", "test_translate", "text=good morning", "target=fr", "--sandbox")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"translatedText": "[fr] good morning", "sandbox": "true"}
    assert len(buyer.transfers()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["test_quote", "--sandbox"], "needs the path input 'symbol'"),
        (["test_quote", "symbol=A", "colour=red", "--sandbox"], "has no input 'colour'"),
        (["test_qoute", "symbol=A"], "did you mean test_quote"),
        (["test_filings", "company=Acme", "--sandbox"], "has no sandbox"),
        (["test_quote", "symbol"], "not KEY=VALUE"),
    ],
)
def test_call_usage_errors_exit_2_before_paying(
    buyer: Buyer, args: list[str], message: str
) -> None:
    result = run(buyer, "call", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert buyer.ledger() == []


def test_call_listing_from_python(buyer: Buyer, sellers: Sellers) -> None:
    result = call_listing(
        "test_quote",
        {"symbol": "ZED"},
        sandbox=True,
        max_amount=PRICES["quote"],
        api_key=buyer.api_key,
        paysign_url=buyer.service,
    )
    assert result.ok and result.data["symbol"] == "ZED"
    assert result.listing.name == "test_quote" and result.listing.price == PRICES["quote"]
    assert result.payment is not None and result.payment.transaction is not None

    async def translate() -> Any:
        async with AsyncPaysignClient(
            buyer.api_key, paysign_url=buyer.service, sandbox=True
        ) as http:
            return await acall_listing(
                "test_translate", {"text": "hi", "target": "de"}, client=http
            )

    translated = asyncio.run(translate())
    assert translated.data == {"translatedText": "[de] hi", "sandbox": "true"}
    assert len(buyer.transfers()) == 2

    with pytest.raises(ListingError):
        call_listing("nope", api_key=buyer.api_key, paysign_url=buyer.service)
