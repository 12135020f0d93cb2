"""``/openapi.json`` says what the server takes, no more and no less, and every answer it gives.

The schemathesis run (``test_schemathesis``) samples the whole API; these pin the rules the
security review named, and the generation of the problem list from the error registry.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from conftest import REGISTRY, signature_body
from paysign import errors
from paysign.api import openapi_schemas
from paysign.api.openapi import openapi_document
from paysign.bootstrap import asset_registry
from paysign.config import Settings
from paysign.http.problems import PROBLEM_TYPES, ProblemType
from paysign.policy.seller import seller_location
from paysign.protocol import parse_signature_request
from paysign.protocol.terms import MAX_AMOUNT

DOCUMENT = openapi_document(Settings(), asset_registry(Settings()))
REQUEST = Draft202012Validator(DOCUMENT["components"]["schemas"]["SignatureRequest"])


def server_takes(body: dict[str, Any]) -> bool:
    """Whether the server takes the body's form (what it refuses with 400 or 422 before the
    policy: the schema's business)."""
    try:
        request = parse_signature_request(body, REGISTRY)
        seller_location(request.seller_url)
    except (errors.MalformedRequest, errors.InvalidPaymentTerms, ValueError):
        return False
    return True


def with_amount(amount: object) -> dict[str, Any]:
    body = copy.deepcopy(signature_body())
    body["paymentRequired"]["accepts"][0]["amount"] = amount
    return body


def described_operations(document: dict[str, Any]) -> set[str]:
    return {
        f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
    }


def documented_problem_types(operation: dict[str, Any]) -> dict[str, int]:
    """type URL -> status, over the operation's problem responses."""
    found = {}
    for status, response in operation["responses"].items():
        schema = response.get("content", {}).get("application/problem+json", {}).get("schema")
        for variant in schema["allOf"][1]["oneOf"] if schema else []:
            found[variant["properties"]["type"]["const"]] = int(status)
    return found


def test_every_api_operation_is_described() -> None:
    assert described_operations(DOCUMENT) == {
        "POST /wallets/signatures",
        "POST /wallets/testnet/funds",
        "GET /wallets/status",
        "GET /catalog",
        "GET /buyers/catalog",
        "GET /catalog/full.json",
        "GET /problems/{slug}",
        "GET /healthz",
        "GET /readyz",
        "GET /metrics",
        "GET /openapi.json",
    }
    assert "/portal" in DOCUMENT["info"]["description"]


def test_the_catalog_file_is_described_where_it_is_served() -> None:
    settings = Settings(catalog_file_url="https://files.example.com/paysign/catalog.json")
    document = openapi_document(settings, asset_registry(settings))
    assert "GET /paysign/catalog.json" in described_operations(document)
    item = document["paths"]["/paysign/catalog.json"]
    assert item["servers"] == [{"url": "https://files.example.com"}]


@pytest.mark.parametrize(
    ("amount", "valid"),
    [
        ("0", False),  # the review's finding
        ("00", False),
        ("-1", False),
        ("1.5", False),
        ("", False),
        (" 1", False),
        ("1e6", False),
        ("\u0661", False),  # an Arabic-Indic digit: isdigit() says yes, the server says no
        (str(MAX_AMOUNT + 1), False),
        ("0" * 78 + "1", False),  # past uint256's 78 digits, zeros or not
        (0, False),
        (-5, False),
        (True, False),
        (10000.5, False),
        (None, False),
        ("1", True),
        ("10000", True),
        (str(MAX_AMOUNT), True),
        ("0010000", True),  # leading zeros are read as the number they spell
        (777, False),  # a JSON number: x402 sellers refuse it when it is echoed
        (MAX_AMOUNT, False),
    ],
)
def test_the_document_and_the_server_agree_on_amounts(amount: object, valid: bool) -> None:
    body = with_amount(amount)
    assert REQUEST.is_valid(body) is valid
    assert server_takes(body) is valid


@given(st.one_of(st.text("0123456789", max_size=90), st.integers(), st.text(max_size=5)))
def test_any_amount_is_valid_in_the_document_exactly_when_the_server_takes_it(
    amount: object,
) -> None:
    body = with_amount(amount)
    assert REQUEST.is_valid(body) is server_takes(body)


@given(st.from_regex(openapi_schemas.SELLER_URL_PATTERN, fullmatch=True))
def test_every_seller_url_the_document_allows_the_server_takes(url: str) -> None:
    body = signature_body()
    body["sellerUrl"] = url
    body["paymentRequired"]["resource"]["url"] = url
    if REQUEST.is_valid(body):  # the pattern's strings may still pass maxLength
        assert server_takes(body), url


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("sellerUrl",), "ftp://api.example.com/x"),
        (("sellerUrl",), "https://api.example.com/a b"),
        (("sellerUrl",), "https://api.example.com:65536/"),
        (("sellerUrl",), "https://api.example.com/admin."),
        (("paymentRequired", "x402Version"), 3),
        (("paymentRequired", "accepts"), []),
        (("paymentRequired", "accepts", 0, "scheme"), "upto"),
        (("paymentRequired", "accepts", 0, "network"), "eip155:1"),
        (("paymentRequired", "accepts", 0, "payTo"), "0x" + "a" * 39),
        (("paymentRequired", "accepts", 0, "asset"), "0x" + "a" * 40),  # not USDC
        (("paymentRequired", "accepts", 0, "maxTimeoutSeconds"), 0),
        (("paymentRequired", "accepts", 0, "extra", "name"), "USD Coin"),  # mainnet's name
        (("paymentRequired", "accepts", 0, "extra", "assetTransferMethod"), "permit2"),
        (("paymentRequired", "extensions"), []),
    ],
)
def test_what_the_server_refuses_the_document_refuses(path: tuple[Any, ...], value: Any) -> None:
    body = signature_body()
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert not server_takes(body)
    assert not REQUEST.is_valid(body)


def test_members_the_server_ignores_the_document_allows() -> None:
    body = signature_body(version=1)
    body["note"] = "anything"
    body["paymentRequired"]["error"] = "X-PAYMENT header is required"
    body["paymentRequired"]["accepts"][0]["outputSchema"] = {"type": "object"}
    body["paymentRequired"]["accepts"].append({"scheme": "anything else"})
    body["paymentRequired"]["accepts"][0]["extra"]["assetTransferMethod"] = "eip3009"
    asset = body["paymentRequired"]["accepts"][0]["asset"]
    body["paymentRequired"]["accepts"][0]["asset"] = "0x" + asset[2:].upper()
    assert server_takes(body)
    assert REQUEST.is_valid(body)


def test_every_refusal_of_signing_is_documented_with_its_status() -> None:
    documented = documented_problem_types(DOCUMENT["paths"]["/wallets/signatures"]["post"])
    base = Settings().resolved_problem_base
    for slug in [
        "malformed-request",
        "request-too-large",
        "unsupported-media-type",
        "invalid-payment-terms",
        "unsupported-payment-terms",
        "seller-resource-mismatch",
        "sandbox-network-mismatch",
        "allow-pending",
        "seller-denied",
        "ecosystem-disabled",
        "spend-cap-exceeded",
        "internal-error",
    ]:
        assert documented[f"{base}/{slug}"] == PROBLEM_TYPES[slug].status
    assert not any(url.endswith("/test-funds-rate-limited") for url in documented)


def test_every_registered_problem_type_is_an_answer_somewhere() -> None:
    documented: set[str] = set()
    for item in DOCUMENT["paths"].values():
        for operation in item.values():
            documented.update(documented_problem_types(operation))
    base = Settings().resolved_problem_base
    # 405 is the router's answer to a method no operation has; the description names it.
    missing = {slug for slug in PROBLEM_TYPES if f"{base}/{slug}" not in documented}
    assert missing == {"method-not-allowed"}


def test_a_new_refusal_is_documented_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    class TooManyTuesdays(errors.PaymentRefused):
        slug = "too-many-tuesdays"
        title = "Too many Tuesdays"

    monkeypatch.setitem(
        PROBLEM_TYPES,
        TooManyTuesdays.slug,
        ProblemType(TooManyTuesdays.slug, 409, TooManyTuesdays.title, "-", "-"),
    )
    document = openapi_document(Settings(), asset_registry(Settings()))
    documented = documented_problem_types(document["paths"]["/wallets/signatures"]["post"])
    assert documented[f"{Settings().resolved_problem_base}/too-many-tuesdays"] == 409
    faucet = documented_problem_types(document["paths"]["/wallets/testnet/funds"]["post"])
    assert not any(url.endswith("/too-many-tuesdays") for url in faucet)


def test_rate_limit_and_credential_answers_carry_their_headers() -> None:
    faucet = DOCUMENT["paths"]["/wallets/testnet/funds"]["post"]["responses"]
    assert faucet["429"]["headers"]["Retry-After"]["$ref"].endswith("/Retry-After")
    for path, method in [("/wallets/signatures", "post"), ("/catalog", "get")]:
        unauthorized = DOCUMENT["paths"][path][method]["responses"]["401"]
        assert "WWW-Authenticate" in unauthorized["headers"]
        body = unauthorized["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/Unauthorized"}


def test_positive_decimal_pattern_is_the_range_it_names() -> None:
    for maximum in (1, 9, 10, 99, 100, 305, 2024, 99999):
        pattern = re.compile(openapi_schemas.positive_decimal_pattern(maximum))
        matched = [n for n in range(maximum * 2 + 10) if pattern.fullmatch(str(n))]
        assert matched == list(range(1, maximum + 1))
