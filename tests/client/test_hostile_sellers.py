"""A seller that abuses its side of the exchange (``hostile_seller.py``) cannot exhaust the
client's memory or time, and cannot pass its free text off as a transaction hash."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from paysign.client import (
    AnswerLimitExceeded,
    AsyncPaysignClient,
    PaysignAuth,
    PaysignSigner,
    payment_of,
)

from .conftest import PRICES, Buyer, Sellers, client_for
from .hostile_seller import MIB, TERMINAL_ATTACK

TRANSACTION_HASH = re.compile(r"0x[0-9a-f]{64}")


def assert_nothing_signed(buyer: Buyer) -> None:
    assert buyer.ledger() == [] and buyer.transfers() == []


def test_an_endless_402_is_refused_before_anything_is_signed(
    buyer: Buyer, sellers: Sellers
) -> None:
    with client_for(buyer, sandbox=True) as http, pytest.raises(AnswerLimitExceeded) as caught:
        http.get(sellers.url + "/hostile/endless-402/weather/oslo")

    refused = caught.value
    assert (refused.reason, refused.limit, refused.payment) == ("too-large", MIB, None)
    assert "Nothing was signed" in refused.remedy
    assert_nothing_signed(buyer)


def test_a_402_that_drips_is_refused_at_the_read_timeout(buyer: Buyer, sellers: Sellers) -> None:
    """A byte every 0.2 s: no single read waits a second, the whole takes 15."""
    started = time.monotonic()
    with (
        client_for(buyer, sandbox=True, timeout=1.0) as http,
        pytest.raises(AnswerLimitExceeded) as caught,
    ):
        http.get(sellers.url + "/hostile/slow-402/weather/oslo")

    assert caught.value.reason == "too-slow" and caught.value.payment is None
    assert time.monotonic() - started < 5
    assert_nothing_signed(buyer)


def test_the_async_client_refuses_an_endless_402_too(buyer: Buyer, sellers: Sellers) -> None:
    async def pay() -> None:
        async with AsyncPaysignClient(
            buyer.api_key, paysign_url=buyer.service, sandbox=True
        ) as http:
            await http.get(sellers.url + "/hostile/endless-402/weather/oslo")

    with pytest.raises(AnswerLimitExceeded) as caught:
        asyncio.run(pay())
    assert caught.value.reason == "too-large"
    assert_nothing_signed(buyer)


def test_an_endless_paid_answer_is_refused_naming_the_payment(
    buyer: Buyer, sellers: Sellers
) -> None:
    with client_for(buyer, sandbox=True) as http, pytest.raises(AnswerLimitExceeded) as caught:
        http.get(sellers.url + "/hostile/endless-paid/weather/rabat")

    refused = caught.value
    assert (refused.reason, refused.limit) == ("too-large", 16 * MIB)
    payment = refused.payment
    assert payment is not None and payment.amount == PRICES["weather"]
    (transfer,) = buyer.transfers()  # it was paid, once: a refused answer is not retried
    assert payment.transaction == transfer["transactionHash"]
    assert payment.transaction in refused.remedy
    assert len(sellers.paid_headers("/v2/weather/rabat")) == 1  # the path the seller saw


def test_a_plain_httpx_client_with_the_auth_refuses_it_too(buyer: Buyer, sellers: Sellers) -> None:
    """Without the retry transport, the auth flow's own read is bounded."""
    auth = PaysignAuth(PaysignSigner(buyer.api_key, buyer.service), sandbox=True)
    with httpx.Client(auth=auth, timeout=30) as http, pytest.raises(AnswerLimitExceeded) as caught:
        http.get(sellers.url + "/hostile/endless-paid/weather/lima")
    assert caught.value.limit == 16 * MIB and caught.value.payment is not None


def test_a_paid_answer_is_counted_as_it_expands(buyer: Buyer, sellers: Sellers) -> None:
    """64 KiB on the wire, 64 MiB once gunzipped: the limit is on what the caller gets."""
    with client_for(buyer, sandbox=True) as http, pytest.raises(AnswerLimitExceeded) as caught:
        http.get(sellers.url + "/hostile/gzip-paid/weather/bern")
    assert caught.value.reason == "too-large" and caught.value.payment is not None


def test_a_large_paid_answer_within_a_raised_limit_is_delivered(
    buyer: Buyer, sellers: Sellers
) -> None:
    size = 20 * MIB
    with client_for(buyer, sandbox=True, max_answer_bytes=32 * MIB) as http:
        response = http.get(f"{sellers.url}/hostile/endless-paid/weather/kyiv?bytes={size}")
    assert response.status_code == 200 and len(response.content) == size
    payment = payment_of(response)
    assert payment is not None and payment.transaction is not None


def test_a_receipt_transaction_that_is_not_a_hash_is_not_reported(
    buyer: Buyer, sellers: Sellers
) -> None:
    with client_for(buyer, sandbox=True) as http:
        response = http.get(sellers.url + "/hostile/lying-receipt/weather/nuuk")

    assert response.status_code == 200
    payment = payment_of(response)
    assert payment is not None and payment.settlement is not None
    assert payment.transaction is None and payment.settlement.transaction == ""
    (transfer,) = buyer.transfers()  # settled; only the receipt lies
    assert payment.settlement.raw["transaction"] == transfer["transactionHash"] + TERMINAL_ATTACK
    assert TRANSACTION_HASH.fullmatch(transfer["transactionHash"])
