"""The client's pure parts: reading terms, choosing the option, reading receipts, mapping
problems to exceptions, building a listing's request. No sockets."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from paysign.client import (
    DEFAULT_USDC,
    DEFAULT_USDC_DOMAIN,
    InvalidPaymentRequired,
    Listing,
    ListingError,
    NoAcceptableOption,
    PaysignProblem,
    ServiceError,
    SpendCapExceeded,
    build_listing_request,
    choose_option,
    decode_payment_required,
    decode_settlement,
    format_usdc,
    parse_usdc,
)
from paysign.client.errors import problem_error
from paysign.protocol import BASE_MAINNET, BASE_SEPOLIA

PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"


def b64(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def option(network: str = "eip155:84532", amount: str = "1000", **extra: Any) -> dict[str, Any]:
    caip2 = "eip155:8453" if network in ("eip155:8453", "base") else "eip155:84532"
    name, version = DEFAULT_USDC_DOMAIN[caip2]
    return {
        "scheme": "exact",
        "network": network,
        "amount": amount,
        "asset": DEFAULT_USDC[caip2],
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 60,
        "extra": {"name": name, "version": version, **extra},
    }


def required(*accepts: dict[str, Any], version: int = 2) -> Any:
    document = {"x402Version": version, "resource": {"url": "https://a.example/x"}}
    document["accepts"] = list(accepts)
    return decode_payment_required({"PAYMENT-REQUIRED": b64(document)}, b"")


def test_v2_terms_come_from_the_header_and_v1_terms_from_the_body() -> None:
    v2 = required(option())
    assert v2.version == 2 and v2.accepts == [option()]
    v1_body = {"x402Version": 1, "error": "X-PAYMENT header is required", "accepts": [option()]}
    v1 = decode_payment_required(httpx.Headers(), json.dumps(v1_body).encode())
    assert v1.version == 1 and v1.error == "X-PAYMENT header is required"
    # Header names are case-insensitive in an httpx response.
    lower = decode_payment_required(httpx.Headers({"payment-required": b64(v2.document)}), b"")
    assert lower.document == v2.document


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({}, b""),
        ({}, b"<html>pay me</html>"),
        ({}, b'{"x402Version": 2, "accepts": []}'),  # v2 terms belong in the header
        ({"PAYMENT-REQUIRED": "not base64!"}, b""),
        ({"PAYMENT-REQUIRED": b64({"x402Version": 2, "accepts": []}).replace("=", "")}, b""),
        ({"PAYMENT-REQUIRED": b64({"x402Version": 3, "accepts": [option()]})}, b""),
        ({"PAYMENT-REQUIRED": b64({"x402Version": 2, "accepts": []})}, b""),
        ({"PAYMENT-REQUIRED": b64([1, 2])}, b""),
    ],
)
def test_unreadable_terms_are_invalid_payment_required(headers: dict, body: bytes) -> None:
    with pytest.raises(InvalidPaymentRequired):
        decode_payment_required(httpx.Headers(headers), body)


def test_the_option_on_the_wanted_network_is_moved_first_verbatim() -> None:
    mainnet, testnet = option("eip155:8453", "5"), option("base-sepolia", "7")
    terms = required(mainnet, testnet)

    chosen = choose_option(terms, BASE_SEPOLIA)
    assert (chosen.index, chosen.amount, chosen.network) == (1, 7, BASE_SEPOLIA)
    assert chosen.payment_required["accepts"] == [testnet, mainnet]
    assert chosen.option == testnet and chosen.option is terms.accepts[1]  # the seller's own
    assert chosen.payment_required["resource"] == terms.document["resource"]
    assert terms.document["accepts"] == [mainnet, testnet]  # the seller's terms are untouched
    assert choose_option(terms, BASE_MAINNET).payment_required["accepts"] == [mainnet, testnet]


def test_the_cheapest_usable_option_is_chosen_and_of_equal_prices_the_sellers_first() -> None:
    dearer, cheaper = option(amount="5000"), option(amount="3000")
    cheaper_too = {**option(amount="3000"), "payTo": "0x" + "cd" * 20}
    unusable_cheapest = {**option(amount="1"), "scheme": "upto"}
    terms = required(dearer, unusable_cheapest, cheaper, cheaper_too)

    chosen = choose_option(terms, BASE_SEPOLIA)
    assert (chosen.index, chosen.amount, chosen.pay_to) == (2, 3000, PAY_TO)
    assert chosen.option is terms.accepts[2]
    assert chosen.payment_required["accepts"] == [cheaper, dearer, unusable_cheapest, cheaper_too]


def test_an_option_naming_another_tokens_domain_is_passed_over_for_one_that_verifies() -> None:
    # The server refuses to sign an option whose extra is not USDC's EIP-712 domain on its
    # network: a cheaper one naming another token must not cost the payment.
    other_token = option(amount="10")
    other_token["extra"] = {"name": "Tether USD", "version": "2"}
    mainnet_domain_on_testnet = option(amount="20")
    mainnet_domain_on_testnet["extra"] = {"name": "USD Coin", "version": "2"}
    no_domain = {**option(amount="30"), "extra": {}}
    usable = option(amount="900")
    terms = required(other_token, mainnet_domain_on_testnet, no_domain, usable)

    assert choose_option(terms, BASE_SEPOLIA).index == 3
    custom = {"eip155:84532": "0x" + "ab" * 20}
    custom_terms = required({**other_token, "asset": custom["eip155:84532"]})
    # a caller's own contract, its domain not given: only the shape of extra is checked
    assert choose_option(custom_terms, BASE_SEPOLIA, usdc=custom).amount == 10
    with pytest.raises(NoAcceptableOption):
        choose_option(custom_terms, BASE_SEPOLIA, usdc=custom, domains={"eip155:84532": ("X", "1")})


@pytest.mark.parametrize(
    "offered",
    [
        {**option(), "scheme": "upto"},
        {**option(), "asset": "0x" + "11" * 20},
        option(assetTransferMethod="permit2"),
        {**option(), "extra": {"name": "USDC"}},
        {key: value for key, value in option().items() if key != "extra"},
        {**option(), "amount": "0"},
        {**option(), "amount": "1.5"},
        option("eip155:1"),
        "not an object",
    ],
)
def test_options_paysign_cannot_pay_are_skipped(offered: Any) -> None:
    with pytest.raises(NoAcceptableOption) as caught:
        choose_option(required(offered), BASE_SEPOLIA)
    assert caught.value.offered == [offered]


def test_v1_amounts_and_asset_case() -> None:
    v1_option = {**option("base-sepolia"), "maxAmountRequired": "2500"}
    del v1_option["amount"]
    v1_option["asset"] = v1_option["asset"].lower()
    chosen = choose_option(required(v1_option, version=1), BASE_SEPOLIA)
    assert chosen.amount == 2500 and chosen.option == v1_option
    custom = {"eip155:84532": "0x" + "ab" * 20}
    with pytest.raises(NoAcceptableOption):
        choose_option(required(option()), BASE_SEPOLIA, usdc=custom)


def test_receipts_are_decoded_from_either_header() -> None:
    receipt = {
        "success": True,
        "transaction": "0x" + "ab" * 32,
        "network": "eip155:84532",
        "payer": PAY_TO,
    }
    v2 = decode_settlement(httpx.Headers({"payment-response": b64(receipt)}))
    assert v2 is not None and v2.success and v2.transaction == receipt["transaction"]
    failed = {
        "success": False,
        "errorReason": "insufficient_funds",
        "transaction": "",
        "network": "base-sepolia",
    }
    v1 = decode_settlement(httpx.Headers({"X-PAYMENT-RESPONSE": b64(failed)}))
    assert v1 is not None and not v1.success and v1.error_reason == "insufficient_funds"
    assert v1.payer is None
    assert decode_settlement(httpx.Headers()) is None
    assert decode_settlement(httpx.Headers({"PAYMENT-RESPONSE": "%%%"})) is None


def test_usdc_amounts() -> None:
    assert parse_usdc("0.01") == 10_000 and parse_usdc(2) == 2_000_000
    assert format_usdc(1) == "0.000001" and format_usdc(12_340_000) == "12.34"
    for bad in ("-1", "0.0000001", "abc", "NaN", "Infinity"):
        with pytest.raises(ValueError):
            parse_usdc(bad)


def test_problems_map_to_types_by_slug() -> None:
    cap = problem_error(
        403,
        {
            "type": "https://p.example/problems/spend-cap-exceeded",
            "title": "Spend cap exceeded",
            "status": 403,
            "detail": "d",
            "cap": "daily",
            "limit": 10,
            "remaining": 3,
            "amount": 5,
            "resetsAt": "2026-11-23T00:00:00Z",
        },
    )
    assert isinstance(cap, SpendCapExceeded)
    assert (cap.cap, cap.limit, cap.remaining, cap.amount, cap.resets_at) == (
        "daily",
        10,
        3,
        5,
        "2026-11-23T00:00:00Z",
    )
    unknown = problem_error(409, {"type": "https://p.example/problems/brand-new", "title": "New"})
    assert type(unknown) is PaysignProblem and not unknown.retryable
    assert str(unknown) == "New"
    broken = problem_error(502, "<html>bad gateway</html>")
    assert isinstance(broken, ServiceError) and broken.retryable and broken.title == "HTTP 502"
    assert problem_error(503, {"type": "x/sandbox-chain-unavailable"}).retryable


LISTING = Listing.from_document(
    {
        "name": "translate",
        "url": "https://t.example/api/",
        "path": "/v1/{lang}/translate",
        "method": "POST",
        "tier": "STANDARD",
        "priceUsdc": 0.003,
        "sandboxAvailable": False,
        "inputs": {
            "path": [{"key": "lang", "required": True}],
            "query": [{"key": "fast", "required": False}],
            "header": [{"key": "X-Account", "required": True}],
            "body": [{"key": "text", "required": True}, {"key": "glossary", "required": False}],
        },
        "tags": ["language"],
    }
)


def test_a_post_listing_request_puts_each_input_in_its_place() -> None:
    call = build_listing_request(
        LISTING,
        {"lang": "fr/ca", "fast": True, "x-account": 7, "text": "hi", "glossary": {"a": "b"}},
        sandbox=False,
    )
    assert (call.method, call.url) == ("POST", "https://t.example/api/v1/fr%2Fca/translate")
    assert call.query == {"fast": "true"}
    assert call.headers == {"X-Account": "7"}
    assert call.body == {"text": "hi", "glossary": {"a": "b"}}
    assert LISTING.price == 3_000


def test_a_listing_without_sandbox_refuses_a_sandbox_call() -> None:
    with pytest.raises(ListingError, match="no sandbox"):
        build_listing_request(LISTING, {"lang": "fr", "X-Account": "1", "text": "x"}, sandbox=True)


def test_a_free_form_body_takes_the_other_inputs() -> None:
    listing = Listing.from_document(
        {
            "name": "q",
            "url": "https://q.example",
            "path": "/ask",
            "method": "POST",
            "tier": "STANDARD",
            "priceUsdc": 0,
            "inputs": {"path": [], "query": [], "header": [], "body": {"type": "object"}},
        }
    )
    call = build_listing_request(listing, {"question": "why?", "n": 2}, sandbox=False)
    assert call.body == {"question": "why?", "n": 2}


@pytest.mark.parametrize(
    ("published", "base_units"),
    [
        (0, 0),
        (0.000001, 1),
        ("0.0000019", 1),  # finer than a base unit: rounded down
        (0.01, 10_000),
        ("0.010000", 10_000),
        (2, 2_000_000),
        ("123456789012345678901234.5", 123456789012345678901234_500000),
    ],
)
def test_a_listing_price_in_base_units(published: Any, base_units: int) -> None:
    listing = Listing.from_document({**LISTING.document, "priceUsdc": published})
    assert listing.price == base_units
