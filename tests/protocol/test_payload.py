"""sign_payment: the payload's shape per version, the lifetime rule, and the header encoding."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import coincurve
import pytest
from eth_account import Account

from paysign.protocol import (
    PaymentTerms,
    PrivateKeySigner,
    SignedPayment,
    checksum_address,
    encode_header,
    parse_signature_request,
    sign_payment,
    valid_before_for,
)
from paysign.protocol.eip712 import keccak256

from .conftest import PAY_TO, TEST_KEY, make_registry, v1_body, v2_body

REGISTRY = make_registry()
SIGNER = PrivateKeySigner(TEST_KEY)
NOW = 1_760_000_000
NONCE = bytes(range(32))
BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
HEX_SIGNATURE = re.compile(r"^0x[0-9a-f]{130}$")
HEX_NONCE = re.compile(r"^0x[0-9a-f]{64}$")


def _terms(body: dict[str, Any]) -> PaymentTerms:
    return parse_signature_request(body, REGISTRY).terms


def _sign(body: dict[str, Any], **kw: Any) -> SignedPayment:
    return sign_payment(_terms(body), SIGNER, now=kw.get("now", NOW), nonce=kw.get("nonce", NONCE))


def _decode(header: str) -> Any:
    return json.loads(base64.b64decode(header, validate=True))


@pytest.mark.parametrize(
    ("timeout", "lifetime"), [(1, 1), (60, 60), (120, 120), (121, 120), (3600, 120)]
)
def test_valid_before_is_now_plus_timeout_capped_at_120s(timeout: int, lifetime: int) -> None:
    terms = _terms(v2_body(maxTimeoutSeconds=timeout))
    assert valid_before_for(terms, NOW) == NOW + lifetime
    assert _sign(v2_body(maxTimeoutSeconds=timeout)).valid_before == NOW + lifetime


def test_v2_payload_shape() -> None:
    body = v2_body()
    terms = _terms(body)
    signed = sign_payment(terms, SIGNER, now=NOW, nonce=NONCE)
    payload = signed.payload
    assert list(payload) == ["x402Version", "payload", "accepted", "resource", "extensions"]
    assert payload["x402Version"] == 2
    assert payload["accepted"] is terms.accepted
    assert payload["resource"] is terms.resource
    assert payload["extensions"] is terms.extensions
    assert list(payload["payload"]) == ["authorization", "signature"]
    assert payload["payload"]["authorization"] == {
        "from": Account.from_key(TEST_KEY).address,
        "to": PAY_TO,
        "value": "10000",
        "validAfter": "0",
        "validBefore": str(NOW + 60),
        "nonce": "0x" + NONCE.hex(),
    }
    assert HEX_SIGNATURE.match(payload["payload"]["signature"])
    assert (signed.valid_after, signed.valid_before, signed.nonce) == (0, NOW + 60, NONCE)
    assert signed.from_address == SIGNER.address
    assert _decode(signed.header) == payload


@pytest.mark.parametrize("network", ["base-sepolia", "eip155:84532", "base", "eip155:8453"])
def test_v1_payload_has_scheme_and_network_as_spelled_and_nothing_else(network: str) -> None:
    payload = _sign(v1_body(network)).payload
    assert list(payload) == ["x402Version", "scheme", "network", "payload"]
    assert (payload["x402Version"], payload["scheme"], payload["network"]) == (1, "exact", network)
    assert payload["payload"]["authorization"]["value"] == "10000"


def test_v2_omits_extensions_only_when_absent() -> None:
    absent = v2_body()
    del absent["paymentRequired"]["extensions"]
    assert "extensions" not in _sign(absent).payload
    empty = v2_body()
    empty["paymentRequired"]["extensions"] = {}
    assert _sign(empty).payload["extensions"] == {}


@pytest.mark.parametrize("spelling", [PAY_TO.lower(), "0x" + PAY_TO[2:].upper(), PAY_TO])
def test_to_is_checksummed_whatever_the_sellers_spelling_and_amount_is_canonical(
    spelling: str,
) -> None:
    """web3.py, in the SDK facilitator's simulation of the transfer, refuses a lower-case
    address: a header that copied the seller's spelling could not be settled there."""
    payload = _sign(v2_body(payTo=spelling, amount="0010000")).payload
    authorization = payload["payload"]["authorization"]
    assert authorization["to"] == PAY_TO
    assert payload["accepted"]["payTo"] == spelling  # the terms echoed as the seller sent them
    assert authorization["value"] == "10000"


def test_signature_recovers_to_from_over_the_token_domain() -> None:
    signed = _sign(v2_body("base"))
    authorization = signed.payload["payload"]["authorization"]
    typed = Account.sign_typed_data(
        TEST_KEY,
        {
            "name": "USD Coin",
            "version": "2",
            "chainId": 8453,
            "verifyingContract": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        },
        {
            "TransferWithAuthorization": [
                {"name": n, "type": t}
                for n, t in [
                    ("from", "address"),
                    ("to", "address"),
                    ("value", "uint256"),
                    ("validAfter", "uint256"),
                    ("validBefore", "uint256"),
                    ("nonce", "bytes32"),
                ]
            ]
        },
        {
            "from": authorization["from"],
            "to": PAY_TO,
            "value": 10000,
            "validAfter": 0,
            "validBefore": signed.valid_before,
            "nonce": NONCE,
        },
    )
    assert signed.payload["payload"]["signature"] == "0x" + bytes(typed.signature).hex()
    sig = bytes.fromhex(signed.payload["payload"]["signature"][2:])
    public = coincurve.PublicKey.from_signature_and_message(
        sig[:64] + bytes((sig[64] - 27,)), bytes(typed.message_hash), hasher=None
    )
    assert (
        checksum_address(keccak256(public.format(compressed=False)[1:])[12:])
        == authorization["from"]
    )


def test_signing_is_deterministic_and_the_nonce_changes_it() -> None:
    assert _sign(v2_body()).header == _sign(v2_body()).header
    other = _sign(v2_body(), nonce=b"\xff" * 32)
    assert other.header != _sign(v2_body()).header
    assert HEX_NONCE.match(other.payload["payload"]["authorization"]["nonce"])


@pytest.mark.parametrize("nonce", [b"", bytes(31), bytes(33)])
def test_nonce_must_be_32_bytes(nonce: bytes) -> None:
    with pytest.raises(ValueError):
        _sign(v2_body(), nonce=nonce)


def test_any_digest_signer_can_sign() -> None:
    class RemoteSigner:  # e.g. a KMS: only an address and a sign_digest call
        address = SIGNER.address

        def sign_digest(self, digest: bytes) -> bytes:
            return SIGNER.sign_digest(digest)

    terms = _terms(v2_body())
    assert (
        sign_payment(terms, RemoteSigner(), now=NOW, nonce=NONCE).header
        == sign_payment(terms, SIGNER, now=NOW, nonce=NONCE).header
    )


def test_header_is_one_line_of_standard_padded_base64_of_compact_utf8_json() -> None:
    body = v2_body()
    body["paymentRequired"]["resource"]["description"] = "Wetter für München ☀ " + "x" * 200
    signed = _sign(body)
    assert BASE64.match(signed.header)
    assert len(signed.header) % 4 == 0
    raw = base64.b64decode(signed.header, validate=True)
    assert raw == json.dumps(signed.payload, separators=(",", ":"), ensure_ascii=False).encode()
    assert "München ☀" in raw.decode("utf-8")


def test_encode_header_uses_the_standard_alphabet() -> None:
    # '?>' and '??' encode to '+'/'/' characters in the standard alphabet.
    header = encode_header({"k": "?>??>"})
    assert "+" in header or "/" in header
    assert base64.b64decode(header) == b'{"k":"?>??>"}'
