"""A seller's 402 read by the shared protocol module: its own errors, and the buyer SDK turning
them into its exceptions with the same message and context."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from paysign import client
from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA
from paysign.protocol.payment_required import (
    DEFAULT_USDC,
    NoUsableOption,
    UnreadableTerms,
    choose_option,
    decode_payment_required,
    decode_settlement,
    payment_header_name,
)

OPTION = {
    "scheme": "exact",
    "network": "eip155:84532",
    "amount": "2500",
    "asset": DEFAULT_USDC["eip155:84532"],
    "payTo": "0x" + "ab" * 20,
    "extra": {"name": "USDC", "version": "2"},
}


def header(document: Any) -> dict[str, str]:
    return {"PAYMENT-REQUIRED": base64.b64encode(json.dumps(document).encode()).decode()}


def test_v2_header_and_v1_body_give_the_document_verbatim() -> None:
    v2 = {"x402Version": 2, "resource": {"url": "https://a.example/x"}, "accepts": [OPTION]}
    required = decode_payment_required(httpx.Headers(header(v2)), b"ignored")
    assert (required.version, required.document) == (2, v2)
    assert payment_header_name(2) == "PAYMENT-SIGNATURE"

    v1 = {"x402Version": 1, "error": "pay first", "accepts": [OPTION]}
    required = decode_payment_required({}, json.dumps(v1).encode())
    assert (required.version, required.error, required.document) == (1, "pay first", v1)
    assert payment_header_name(1) == "X-PAYMENT"


@pytest.mark.parametrize(
    ("headers", "body", "says"),
    [
        ({}, b"", "no x402 terms"),
        ({}, b'{"x402Version": 2, "accepts": [1]}', "no x402 terms"),
        ({"PAYMENT-REQUIRED": "%%%"}, b"", "not standard base64"),
        (header({"x402Version": 3, "accepts": [OPTION]}), b"", "x402Version 3"),
        (header({"x402Version": 2, "accepts": []}), b"", "no payment option"),
        (header(["not", "an", "object"]), b"", "not a JSON object"),
    ],
)
def test_unreadable_terms(headers: dict[str, str], body: bytes, says: str) -> None:
    with pytest.raises(UnreadableTerms, match=says) as caught:
        decode_payment_required(headers, body)
    with pytest.raises(client.InvalidPaymentRequired) as translated:
        client.decode_payment_required(headers, body)
    assert str(translated.value) == str(caught.value)


def test_no_usable_option_names_the_network_and_the_offer() -> None:
    required = decode_payment_required(header({"x402Version": 2, "accepts": [OPTION]}), b"")
    assert choose_option(required, BASE_SEPOLIA).amount == 2500
    with pytest.raises(NoUsableOption) as caught:
        choose_option(required, BASE_MAINNET)
    assert caught.value.network == "eip155:8453" and caught.value.offered == [OPTION]

    with pytest.raises(client.NoAcceptableOption) as translated:
        client.choose_option(required, BASE_MAINNET)
    assert str(translated.value) == str(caught.value)
    assert translated.value.context == {"network": "eip155:8453", "offered": [OPTION]}


def test_receipt() -> None:
    receipt = {"success": True, "transaction": "0x" + "12" * 32, "network": "eip155:84532"}
    value = base64.b64encode(json.dumps(receipt).encode()).decode()
    settlement = decode_settlement({"PAYMENT-RESPONSE": value})
    assert settlement is not None and settlement.success and settlement.raw == receipt
    assert decode_settlement({"X-PAYMENT-RESPONSE": "%%%"}) is None


@pytest.mark.parametrize(
    "transaction",
    [
        "0x" + "ab" * 32 + "\x1b]52;c;Y3VybCBldmlsIHwgc2gK\x1b\\",  # a hash, then a clipboard write
        "0x" + "ab" * 32 + "\n",
        "0x" + "ab" * 31,
        "0x" + "zz" * 32,
        "\u202e0x" + "ab" * 32,
        64,
        ["0x" + "ab" * 32],
    ],
)
def test_a_receipt_transaction_that_is_not_a_hash_is_dropped(transaction: object) -> None:
    receipt = {"success": True, "transaction": transaction, "network": "eip155:84532"}
    value = base64.b64encode(json.dumps(receipt).encode()).decode()
    settlement = decode_settlement({"PAYMENT-RESPONSE": value})
    assert settlement is not None and settlement.transaction == ""
    assert settlement.raw["transaction"] == transaction  # as the seller sent it
