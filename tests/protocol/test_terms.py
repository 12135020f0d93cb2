"""parse_signature_request: what it accepts, and one refusal (type + pointer) per rule."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paysign.errors import InvalidPaymentTerms, MalformedRequest, UnsupportedPaymentTerms
from paysign.protocol import (
    BASE_MAINNET,
    BASE_SEPOLIA,
    AssetRegistry,
    UsdcToken,
    parse_address,
    parse_signature_request,
)

from .conftest import (
    PAY_TO,
    SELLER_URL,
    USDC_BASE,
    USDC_BASE_SEPOLIA,
    make_registry,
    v1_body,
    v2_body,
)

REGISTRY = make_registry()
DELETE = object()
A0 = "/paymentRequired/accepts/0"


def _set(body: Any, path: str, value: Any) -> Any:
    """Set (or delete, with DELETE) the value at a JSON-pointer ``path``; '' replaces the body."""
    if not path:
        return value
    *parents, last = path.lstrip("/").split("/")
    node = body
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    key_or_index: Any = int(last) if isinstance(node, list) else last
    if value is DELETE:
        del node[key_or_index]
    else:
        node[key_or_index] = value
    return body


def _refusal(
    body: Any, registry: AssetRegistry = REGISTRY
) -> MalformedRequest | InvalidPaymentTerms:
    with pytest.raises((MalformedRequest, InvalidPaymentTerms)) as caught:
        parse_signature_request(body, registry)
    return caught.value


# ---------------------------------------------------------------------------------------------
# Accepted input


def test_v2_terms_are_parsed_and_echo_fields_are_the_objects_received() -> None:
    body = v2_body()
    request = parse_signature_request(body, REGISTRY)
    terms = request.terms
    pr = body["paymentRequired"]
    assert request.seller_url == SELLER_URL
    assert terms.x402_version == 2
    assert terms.network is BASE_SEPOLIA
    assert terms.network_name == "eip155:84532"
    assert terms.amount == 10000
    assert terms.token.address == parse_address(USDC_BASE_SEPOLIA)
    assert terms.pay_to == parse_address(PAY_TO)
    assert terms.max_timeout_seconds == 60
    assert terms.accepted is pr["accepts"][0]
    assert terms.resource is pr["resource"]
    assert terms.extensions is pr["extensions"]


def test_v1_body_without_top_level_resource_uses_max_amount_required() -> None:
    terms = parse_signature_request(v1_body("base"), REGISTRY).terms
    assert (terms.x402_version, terms.network, terms.network_name) == (1, BASE_MAINNET, "base")
    assert terms.amount == 10000
    assert terms.resource is None
    assert terms.extensions is None


@pytest.mark.parametrize(
    ("make", "network", "expected"),
    [
        (v2_body, "base-sepolia", BASE_SEPOLIA),
        (v2_body, "base", BASE_MAINNET),
        (v1_body, "eip155:84532", BASE_SEPOLIA),
        (v1_body, "eip155:8453", BASE_MAINNET),
    ],
)
def test_aliases_and_caip2_are_accepted_in_both_versions(
    make: Any, network: str, expected: Any
) -> None:
    terms = parse_signature_request(make(network), REGISTRY).terms
    assert terms.network is expected
    assert terms.network_name == network


@pytest.mark.parametrize(
    ("make", "path", "value", "amount"),
    [
        (v2_body, f"{A0}/amount", str(2**63 - 1), 2**63 - 1),
        (v2_body, f"{A0}/maxAmountRequired", "5", 10000),  # v2 facilitators check 'amount'
        (v1_body, f"{A0}/amount", "5", 10000),  # v1 facilitators check 'maxAmountRequired'
        (v1_body, f"{A0}/maxAmountRequired", None, 5),  # then a v1 'amount' is the price
    ],
)
def test_amount_forms(make: Any, path: str, value: Any, amount: int) -> None:
    body = make(amount="5") if value is None else make()
    terms = parse_signature_request(_set(body, path, value), REGISTRY).terms
    assert terms.amount == amount


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (f"{A0}/asset", USDC_BASE_SEPOLIA.lower()),
        (f"{A0}/asset", "0x" + USDC_BASE_SEPOLIA[2:].upper()),
        (f"{A0}/payTo", PAY_TO.lower()),
        (f"{A0}/extra/assetTransferMethod", "eip3009"),
        (f"{A0}/extra/paymentFlow", "authorization"),
        (f"{A0}/maxTimeoutSeconds", 2**63 - 1),
        ("/paymentRequired/extensions", None),
        ("/paymentRequired/extensions", DELETE),
        ("/sellerUrl", "http://localhost:8080/a/b?q=1#frag"),
        ("/sellerUrl", "https://[2001:db8::1]/x"),
    ],
)
def test_accepted_variations(path: str, value: Any) -> None:
    parse_signature_request(_set(v2_body(), path, value), REGISTRY)


@pytest.mark.parametrize("resource", ["https://api.example.com/x", {"url": "https://a.example"}])
def test_v1_top_level_resource_may_be_a_string_or_an_object(resource: Any) -> None:
    body = _set(v1_body(), "/paymentRequired/resource", resource)
    assert parse_signature_request(body, REGISTRY).terms.resource is resource


# ---------------------------------------------------------------------------------------------
# One refusal per rule: (base body, pointer to change, new value or DELETE) -> (type, pointer)


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


MAL, INV, UNS = MalformedRequest, InvalidPaymentTerms, UnsupportedPaymentTerms
LONG_URL = "https://a.example/" + "x" * (2049 - len("https://a.example/"))
CASES: list[tuple[str, Any, str, Any, type, str]] = [
    # --- MalformedRequest: shape and JSON types
    ("body-list", v2_body, "", [], MAL, ""),
    ("body-null", v2_body, "", None, MAL, ""),
    ("body-string", v2_body, "", "{}", MAL, ""),
    ("sellerUrl-missing", v2_body, "/sellerUrl", DELETE, MAL, "/sellerUrl"),
    ("sellerUrl-number", v2_body, "/sellerUrl", 5, MAL, "/sellerUrl"),
    ("pr-missing", v2_body, "/paymentRequired", DELETE, MAL, "/paymentRequired"),
    ("pr-array", v2_body, "/paymentRequired", [], MAL, "/paymentRequired"),
    ("pr-string", v2_body, "/paymentRequired", "eyJ4NDAyVmVyc2lvbiI6Mn0=", MAL, "/paymentRequired"),
    (
        "version-missing",
        v2_body,
        "/paymentRequired/x402Version",
        DELETE,
        MAL,
        "/paymentRequired/x402Version",
    ),
    (
        "version-string",
        v2_body,
        "/paymentRequired/x402Version",
        "2",
        MAL,
        "/paymentRequired/x402Version",
    ),
    (
        "version-bool",
        v2_body,
        "/paymentRequired/x402Version",
        True,
        MAL,
        "/paymentRequired/x402Version",
    ),
    (
        "version-float",
        v2_body,
        "/paymentRequired/x402Version",
        2.0,
        MAL,
        "/paymentRequired/x402Version",
    ),
    (
        "accepts-missing",
        v2_body,
        "/paymentRequired/accepts",
        DELETE,
        MAL,
        "/paymentRequired/accepts",
    ),
    ("accepts-empty", v2_body, "/paymentRequired/accepts", [], MAL, "/paymentRequired/accepts"),
    ("accepts-object", v2_body, "/paymentRequired/accepts", {}, MAL, "/paymentRequired/accepts"),
    ("accepts0-string", v2_body, A0, "exact", MAL, A0),
    ("accepts0-null", v2_body, A0, None, MAL, A0),
    *[
        (f"{key}-{kind}", v2_body, f"{A0}/{key}", value, MAL, f"{A0}/{key}")
        for key in ("scheme", "network", "asset", "payTo")
        for kind, value in (("missing", DELETE), ("number", 1), ("null", None))
    ],
    ("extra-missing", v2_body, f"{A0}/extra", DELETE, MAL, f"{A0}/extra"),
    ("extra-null", v2_body, f"{A0}/extra", None, MAL, f"{A0}/extra"),
    ("extra-json-string", v2_body, f"{A0}/extra", '{"name":"USDC"}', MAL, f"{A0}/extra"),
    ("timeout-missing", v2_body, f"{A0}/maxTimeoutSeconds", DELETE, MAL, f"{A0}/maxTimeoutSeconds"),
    ("timeout-bool", v2_body, f"{A0}/maxTimeoutSeconds", True, MAL, f"{A0}/maxTimeoutSeconds"),
    ("timeout-float", v2_body, f"{A0}/maxTimeoutSeconds", 60.0, MAL, f"{A0}/maxTimeoutSeconds"),
    ("timeout-string", v2_body, f"{A0}/maxTimeoutSeconds", "60", MAL, f"{A0}/maxTimeoutSeconds"),
    ("amount-missing", v2_body, f"{A0}/amount", DELETE, MAL, f"{A0}/amount"),
    ("v1-amount-missing", v1_body, f"{A0}/maxAmountRequired", DELETE, MAL, f"{A0}/amount"),
    ("amount-float", v2_body, f"{A0}/amount", 10000.0, MAL, f"{A0}/amount"),
    ("amount-bool", v2_body, f"{A0}/amount", True, MAL, f"{A0}/amount"),
    ("amount-list", v2_body, f"{A0}/amount", ["1"], MAL, f"{A0}/amount"),
    ("v1-amount-float", v1_body, f"{A0}/maxAmountRequired", 1.5, MAL, f"{A0}/maxAmountRequired"),
    (
        "v2-resource-missing",
        v2_body,
        "/paymentRequired/resource",
        DELETE,
        MAL,
        "/paymentRequired/resource",
    ),
    (
        "v2-resource-string",
        v2_body,
        "/paymentRequired/resource",
        "https://a.example",
        MAL,
        "/paymentRequired/resource",
    ),
    (
        "v2-resource-null",
        v2_body,
        "/paymentRequired/resource",
        None,
        MAL,
        "/paymentRequired/resource",
    ),
    (
        "v2-resource-url-missing",
        v2_body,
        "/paymentRequired/resource/url",
        DELETE,
        MAL,
        "/paymentRequired/resource/url",
    ),
    (
        "v2-resource-url-empty",
        v2_body,
        "/paymentRequired/resource/url",
        "",
        MAL,
        "/paymentRequired/resource/url",
    ),
    (
        "v2-resource-url-number",
        v2_body,
        "/paymentRequired/resource/url",
        1,
        MAL,
        "/paymentRequired/resource/url",
    ),
    (
        "v1-resource-number",
        v1_body,
        "/paymentRequired/resource",
        1,
        MAL,
        "/paymentRequired/resource",
    ),
    (
        "v1-resource-list",
        v1_body,
        "/paymentRequired/resource",
        [],
        MAL,
        "/paymentRequired/resource",
    ),
    (
        "extensions-list",
        v2_body,
        "/paymentRequired/extensions",
        [],
        MAL,
        "/paymentRequired/extensions",
    ),
    # Parses from JSON (orjson reads 1024 levels) but cannot be re-encoded (orjson writes 255).
    ("accepts0-too-deep", v2_body, f"{A0}/extra/deep", _deep(300), MAL, A0),
    (
        "extensions-int-too-big",
        v2_body,
        "/paymentRequired/extensions",
        {"a": 2**64},
        MAL,
        "/paymentRequired/extensions",
    ),
    # --- InvalidPaymentTerms: well-formed, unsignable values
    ("url-relative", v2_body, "/sellerUrl", "/premium-data", INV, "/sellerUrl"),
    ("url-ftp", v2_body, "/sellerUrl", "ftp://a.example/x", INV, "/sellerUrl"),
    ("url-no-host", v2_body, "/sellerUrl", "https:///path", INV, "/sellerUrl"),
    ("url-scheme-only", v2_body, "/sellerUrl", "https://", INV, "/sellerUrl"),
    ("url-empty", v2_body, "/sellerUrl", "", INV, "/sellerUrl"),
    ("url-space", v2_body, "/sellerUrl", "https://a.example/a b", INV, "/sellerUrl"),
    ("url-newline", v2_body, "/sellerUrl", "https://a.example/\n", INV, "/sellerUrl"),
    ("url-bad-ipv6", v2_body, "/sellerUrl", "https://[::1/x", INV, "/sellerUrl"),
    ("url-bad-port", v2_body, "/sellerUrl", "https://a.example:99999/x", INV, "/sellerUrl"),
    ("url-too-long", v2_body, "/sellerUrl", LONG_URL, INV, "/sellerUrl"),
    ("version-3", v2_body, "/paymentRequired/x402Version", 3, INV, "/paymentRequired/x402Version"),
    ("version-0", v2_body, "/paymentRequired/x402Version", 0, INV, "/paymentRequired/x402Version"),
    *[
        (f"amount-{value!r}", v2_body, f"{A0}/amount", value, INV, f"{A0}/amount")
        for value in ("", "abc", "-1", "+1", " 1", "1.5", "1e6", "0x10", "\u0661\u0662", "0", "000")
    ],
    ("amount-2**63", v2_body, f"{A0}/amount", str(2**63), INV, f"{A0}/amount"),
    ("amount-huge", v2_body, f"{A0}/amount", "9" * 5000, INV, f"{A0}/amount"),
    ("amount-int", v2_body, f"{A0}/amount", 777, MAL, f"{A0}/amount"),
    # A mixed-case payTo whose EIP-55 checksum is wrong is a mistyped address.
    ("payTo-bad-checksum", v2_body, f"{A0}/payTo", PAY_TO[:-1] + "c", INV, f"{A0}/payTo"),
    ("payTo-0X", v2_body, f"{A0}/payTo", "0X" + PAY_TO[2:], INV, f"{A0}/payTo"),
    ("payTo-zero", v2_body, f"{A0}/payTo", "0x" + "0" * 40, INV, f"{A0}/payTo"),
    (
        "timeout-beyond-64-bits",
        v2_body,
        f"{A0}/maxTimeoutSeconds",
        float(2**64),
        INV,
        f"{A0}/maxTimeoutSeconds",
    ),
    ("amount-int-0", v2_body, f"{A0}/amount", 0, MAL, f"{A0}/amount"),
    ("amount-v2-null", v2_body, f"{A0}/amount", None, MAL, f"{A0}/amount"),
    ("v1-amount-zero", v1_body, f"{A0}/maxAmountRequired", "0", INV, f"{A0}/maxAmountRequired"),
    *[
        (f"{key}-{value!r}", v2_body, f"{A0}/{key}", value, INV, f"{A0}/{key}")
        for key in ("asset", "payTo")
        for value in (
            "",
            "0x1234",
            PAY_TO[2:],
            "0x" + "g" * 40,
            PAY_TO + "00",
            "0x" + "00 " * 13 + "0",
        )
    ],
    ("timeout-0", v2_body, f"{A0}/maxTimeoutSeconds", 0, INV, f"{A0}/maxTimeoutSeconds"),
    ("timeout-negative", v2_body, f"{A0}/maxTimeoutSeconds", -60, INV, f"{A0}/maxTimeoutSeconds"),
    ("extra-name-missing", v2_body, f"{A0}/extra/name", DELETE, INV, f"{A0}/extra/name"),
    ("extra-name-number", v2_body, f"{A0}/extra/name", 1, INV, f"{A0}/extra/name"),
    ("extra-version-missing", v2_body, f"{A0}/extra/version", DELETE, INV, f"{A0}/extra/version"),
    ("extra-version-number", v2_body, f"{A0}/extra/version", 2, INV, f"{A0}/extra/version"),
    (
        "extra-name-mainnet-on-testnet",
        v2_body,
        f"{A0}/extra/name",
        "USD Coin",
        INV,
        f"{A0}/extra/name",
    ),
    ("extra-version-wrong", v2_body, f"{A0}/extra/version", "1", INV, f"{A0}/extra/version"),
    # --- UnsupportedPaymentTerms: valid x402 that paysign does not sign
    ("scheme-upto", v2_body, f"{A0}/scheme", "upto", UNS, f"{A0}/scheme"),
    ("scheme-case", v2_body, f"{A0}/scheme", "EXACT", UNS, f"{A0}/scheme"),
    ("network-ethereum", v2_body, f"{A0}/network", "eip155:1", UNS, f"{A0}/network"),
    (
        "network-solana",
        v2_body,
        f"{A0}/network",
        "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
        UNS,
        f"{A0}/network",
    ),
    ("network-case", v2_body, f"{A0}/network", "Base", UNS, f"{A0}/network"),
    ("asset-other-token", v2_body, f"{A0}/asset", PAY_TO, UNS, f"{A0}/asset"),
    ("asset-mainnet-usdc-on-testnet", v2_body, f"{A0}/asset", USDC_BASE, UNS, f"{A0}/asset"),
    (
        "method-permit2",
        v2_body,
        f"{A0}/extra/assetTransferMethod",
        "permit2",
        UNS,
        f"{A0}/extra/assetTransferMethod",
    ),
    (
        "method-erc7710",
        v2_body,
        f"{A0}/extra/assetTransferMethod",
        "erc7710",
        UNS,
        f"{A0}/extra/assetTransferMethod",
    ),
    (
        "method-number",
        v2_body,
        f"{A0}/extra/assetTransferMethod",
        1,
        UNS,
        f"{A0}/extra/assetTransferMethod",
    ),
]


@pytest.mark.parametrize(
    ("make", "path", "value", "error", "pointer"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_rule_names_its_field(
    make: Any, path: str, value: Any, error: type, pointer: str
) -> None:
    refusal = _refusal(_set(make(), path, value))
    assert type(refusal) is error, refusal
    assert refusal.pointer == pointer
    assert refusal.reason


def test_network_without_configured_usdc_is_unsupported() -> None:
    mainnet_only = AssetRegistry(
        [UsdcToken(BASE_MAINNET, parse_address(USDC_BASE), "USD Coin", "2")]
    )
    refusal = _refusal(v2_body(), mainnet_only)
    assert type(refusal) is UnsupportedPaymentTerms
    assert refusal.pointer == f"{A0}/network"


def test_wrong_domain_name_explains_on_chain_failure() -> None:
    refusal = _refusal(_set(v2_body(), f"{A0}/extra/name", "USD Coin"))
    assert "would not verify at the USDC contract" in refusal.reason


def test_only_the_first_accepts_entry_is_checked() -> None:
    body = v2_body()
    body["paymentRequired"]["accepts"].append({"scheme": "upto"})
    parse_signature_request(body, REGISTRY)


# ---------------------------------------------------------------------------------------------
# Fuzz: nothing but the three domain errors ever escapes

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
POINTERS = sorted({case[2] for case in CASES if case[2]} | {f"{A0}/extra/name", f"{A0}/resource"})


def _parse_or_refuse(body: Any) -> None:
    # UnsupportedPaymentTerms is a subclass of InvalidPaymentTerms.
    with contextlib.suppress(MalformedRequest, InvalidPaymentTerms):
        parse_signature_request(body, REGISTRY)


@settings(max_examples=1000, deadline=None)
@given(JSON)
def test_fuzz_arbitrary_json_only_raises_domain_errors(body: Any) -> None:
    _parse_or_refuse(body)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([v2_body, v1_body]),
    st.lists(st.tuples(st.sampled_from(POINTERS), st.one_of(st.just(DELETE), JSON)), max_size=4),
)
def test_fuzz_mutated_valid_bodies_only_raise_domain_errors(
    make: Any, edits: list[tuple[str, Any]]
) -> None:
    body = make()
    for path, value in edits:
        try:
            body = _set(body, path, value)
        except (KeyError, IndexError, TypeError, ValueError):
            continue  # an earlier edit removed or replaced this path's parent
    _parse_or_refuse(body)
