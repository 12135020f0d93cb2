"""Conformance with code nobody here wrote: the x402 SDK (2.25.0) decodes and verifies our headers.

The SDK facilitator runs every off-chain check (shape, scheme, network, EIP-712 domain, recipient,
exact amount, time window, ECDSA recovery) against a stub chain; on-chain-only rules (low-s,
v = 27/28, ``accepted`` copied verbatim) are asserted here directly.
"""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any

import orjson
import pytest
import x402
import x402.mechanisms.evm.exact.client as sdk_exact_client
from eth_account import Account
from x402.http.utils import decode_payment_signature_header, encode_payment_signature_header
from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme, register_exact_evm_client
from x402.mechanisms.evm.exact.v1.facilitator import ExactEvmSchemeV1
from x402.schemas import PaymentPayload, PaymentRequired, PaymentRequirements
from x402.schemas.v1 import PaymentPayloadV1, PaymentRequirementsV1

from paysign.protocol import (
    PrivateKeySigner,
    SignedPayment,
    checksum_address,
    parse_signature_request,
    sign_payment,
)
from paysign.protocol.eip712 import SECP256K1_HALF_N

from .conftest import PAY_TO, TEST_KEY, USDC_BASE_SEPOLIA, make_registry, v1_body, v2_body

REGISTRY = make_registry()
SIGNER = PrivateKeySigner(TEST_KEY)
PAYER = checksum_address(SIGNER.address)
NONCE = bytes.fromhex("f3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480")
TS_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")  # the TS seller's check before decoding
CAIP2_OF = {"base": "eip155:8453", "base-sepolia": "eip155:84532"}
V1_NAME_OF = {caip2: name for name, caip2 in CAIP2_OF.items()}


class OfflineChain:
    """A ``FacilitatorEvmSigner`` with no chain: the payer is a plain EOA (no code), every other
    address (the USDC asset) is a deployed contract, and the transferWithAuthorization
    simulation succeeds (returns without raising)."""

    def __init__(self, payer: str) -> None:
        self.payer = payer.lower()

    def get_addresses(self) -> list[str]:
        return []

    def get_code(self, address: str) -> bytes:
        return b"" if address.lower() == self.payer else b"\x60\x80\x60\x40"

    def read_contract(self, address: str, abi: Any, function_name: str, *args: Any) -> Any:
        return None


@pytest.fixture(scope="module")
def facilitator() -> x402.x402FacilitatorSync:
    chain = OfflineChain(PAYER)
    facilitator = x402.x402FacilitatorSync()
    facilitator.register(["eip155:8453", "eip155:84532"], ExactEvmFacilitatorScheme(chain))
    facilitator.register_v1(["base", "base-sepolia"], ExactEvmSchemeV1(chain))
    return facilitator


def _sign_now(body: dict[str, Any]) -> SignedPayment:
    # The facilitator checks validBefore >= now + 6 on the real wall clock.
    terms = parse_signature_request(body, REGISTRY).terms
    return sign_payment(terms, SIGNER, now=int(time.time()), nonce=NONCE)


def _requirements(accepted: dict[str, Any], version: int) -> Any:
    model = PaymentRequirements if version == 2 else PaymentRequirementsV1
    return model.model_validate(accepted)


def _assert_wire_rules(signed: SignedPayment) -> None:
    assert TS_BASE64.match(signed.header)
    signature = bytes.fromhex(signed.payload["payload"]["signature"][2:])
    assert len(signature) == 65
    assert signature[64] in (27, 28)
    assert int.from_bytes(signature[32:64], "big") <= SECP256K1_HALF_N


@pytest.mark.parametrize(
    ("make", "network"),
    [
        (v2_body, "eip155:8453"),
        (v2_body, "eip155:84532"),
        (v1_body, "base"),
        (v1_body, "base-sepolia"),
    ],
)
def test_sdk_facilitator_accepts_our_header(
    facilitator: x402.x402FacilitatorSync, make: Any, network: str
) -> None:
    body = make(network)
    signed = _sign_now(body)
    _assert_wire_rules(signed)
    payload = decode_payment_signature_header(signed.header)
    version = body["paymentRequired"]["x402Version"]
    assert isinstance(payload, PaymentPayload if version == 2 else PaymentPayloadV1)
    accepted = body["paymentRequired"]["accepts"][0]
    result = facilitator.verify(payload, _requirements(accepted, version))
    assert result.is_valid, result
    assert result.payer == PAYER


@pytest.mark.parametrize("network", ["base", "base-sepolia"])
def test_v2_terms_spelled_with_a_v1_alias(
    facilitator: x402.x402FacilitatorSync, network: str
) -> None:
    body = v2_body(network)
    signed = _sign_now(body)
    _assert_wire_rules(signed)
    payload = decode_payment_signature_header(signed.header)
    assert isinstance(payload, PaymentPayload)
    assert payload.accepted.network == network  # echoed as the seller spelled it
    # The SDK's v2 facilitator only routes CAIP-2 ids, so the alias cannot be verified as sent.
    # The network string is not part of the signed data (the chain id in the domain is), so
    # verifying with the network normalised on both sides checks the very same signature.
    caip2 = CAIP2_OF[network]
    normalised = payload.model_copy(
        update={"accepted": payload.accepted.model_copy(update={"network": caip2})}
    )
    requirements = _requirements({**body["paymentRequired"]["accepts"][0], "network": caip2}, 2)
    result = facilitator.verify(normalised, requirements)
    assert result.is_valid, result


@pytest.mark.parametrize("network", ["eip155:8453", "eip155:84532"])
def test_v1_terms_spelled_with_caip2(facilitator: x402.x402FacilitatorSync, network: str) -> None:
    body = v1_body(network)
    signed = _sign_now(body)
    _assert_wire_rules(signed)
    payload = decode_payment_signature_header(signed.header)
    assert isinstance(payload, PaymentPayloadV1)
    assert payload.network == network  # echoed as the seller spelled it
    # The SDK's v1 facilitator only knows legacy names; as above, normalise the unsigned
    # network string on both sides and verify the same signature.
    v1_name = V1_NAME_OF[network]
    normalised = payload.model_copy(update={"network": v1_name})
    requirements = _requirements({**body["paymentRequired"]["accepts"][0], "network": v1_name}, 1)
    result = facilitator.verify(normalised, requirements)
    assert result.is_valid, result


def _key_orders(value: Any) -> Any:
    """Every object's key sequence, recursively (== alone ignores key order)."""
    if isinstance(value, dict):
        return [(key, _key_orders(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_key_orders(item) for item in value]
    return value


def test_accepted_is_echoed_verbatim(facilitator: x402.x402FacilitatorSync) -> None:
    # Lower-case addresses, unknown keys, a null, a nested extra, unusual key order: sellers
    # deep-compare this object with their own, so nothing may be normalised.
    accepted = {
        "maxTimeoutSeconds": 60,
        "payTo": PAY_TO.lower(),
        "scheme": "exact",
        "outputSchema": None,
        "asset": USDC_BASE_SEPOLIA.lower(),
        "network": "eip155:84532",
        "description": "Wetter für München",
        "amount": "10000",
        "extra": {
            "version": "2",
            "name": "USDC",
            "assetTransferMethod": "eip3009",
            "seller": {"tier": None, "tags": ["a", 1, 2.5, True], "zz": {}, "aa": []},
        },
    }
    body = v2_body()
    body["paymentRequired"]["accepts"] = [accepted]
    sent = orjson.dumps(accepted)
    signed = _sign_now(body)

    decoded = json.loads(base64.b64decode(signed.header, validate=True))
    assert decoded["accepted"] == accepted
    assert _key_orders(decoded["accepted"]) == _key_orders(accepted)
    assert orjson.dumps(decoded["accepted"]) == sent
    assert decoded["resource"] == body["paymentRequired"]["resource"]
    assert decoded["extensions"] == body["paymentRequired"]["extensions"]
    assert decoded["payload"]["authorization"]["to"] == PAY_TO  # checksummed, whatever was sent

    result = facilitator.verify(
        decode_payment_signature_header(signed.header), _requirements(accepted, 2)
    )
    assert result.is_valid, result


def test_the_checker_does_check(facilitator: x402.x402FacilitatorSync) -> None:
    """Guard against a vacuous conformance suite: a tampered header must be refused."""
    body = v2_body()
    decoded = json.loads(base64.b64decode(_sign_now(body).header))
    decoded["payload"]["authorization"]["validBefore"] = str(int(time.time()) + 100)
    payload = PaymentPayload.model_validate(decoded)
    result = facilitator.verify(payload, _requirements(body["paymentRequired"]["accepts"][0], 2))
    assert not result.is_valid
    assert result.invalid_reason == "invalid_exact_evm_payload_signature"


@pytest.mark.parametrize("network", ["eip155:8453", "eip155:84532"])
def test_header_is_byte_identical_to_the_sdk_client(
    monkeypatch: pytest.MonkeyPatch, network: str
) -> None:
    """Same key, time and nonce: the SDK's own v2 client writes exactly our header.

    (maxTimeoutSeconds <= 120, so the SDK's validBefore = now + maxTimeoutSeconds equals ours;
    v1 is not compared because the SDK's v1 client uses validAfter = now - 600, ours is 0.)
    """
    now = 1_760_000_000

    class FrozenClock:
        @staticmethod
        def time() -> float:
            return now + 0.75

    monkeypatch.setattr(sdk_exact_client, "time", FrozenClock)
    monkeypatch.setattr(sdk_exact_client, "create_nonce", lambda: "0x" + NONCE.hex())
    client = x402.x402ClientSync()
    client.set_spend_controls(False)
    register_exact_evm_client(client, Account.from_key(TEST_KEY))

    body = v2_body(network)
    sdk_payload = client.create_payment_payload(
        PaymentRequired.model_validate(body["paymentRequired"])
    )
    sdk_header = encode_payment_signature_header(sdk_payload)

    terms = parse_signature_request(body, REGISTRY).terms
    ours = sign_payment(terms, SIGNER, now=now, nonce=NONCE).header
    assert ours == sdk_header
