"""The lean EIP-712 path equals eth-account's generic one, byte for byte."""

from __future__ import annotations

import coincurve
import pytest
from eth_account import Account
from eth_utils import to_checksum_address
from hypothesis import given, settings
from hypothesis import strategies as st

from paysign.protocol import (
    PrivateKeySigner,
    address_of,
    checksum_address,
    domain_separator,
    sign_digest,
    transfer_authorization_digest,
)
from paysign.protocol.eip712 import (
    EIP712_DOMAIN_TYPEHASH,
    SECP256K1_HALF_N,
    TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
    keccak256,
)

from .conftest import TEST_KEY, USDC_BASE, USDC_BASE_SEPOLIA

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
# (name, version, chain id, USDC address): the two domains paysign signs for.
DOMAINS = [("USD Coin", "2", 8453, USDC_BASE), ("USDC", "2", 84532, USDC_BASE_SEPOLIA)]
TRANSFER_TYPES = {
    "TransferWithAuthorization": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "validAfter", "type": "uint256"},
        {"name": "validBefore", "type": "uint256"},
        {"name": "nonce", "type": "bytes32"},
    ]
}


def test_typehashes_are_the_hashes_of_their_type_strings() -> None:
    assert (
        keccak256(
            b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
        )
        == EIP712_DOMAIN_TYPEHASH
    )
    assert (
        keccak256(
            b"TransferWithAuthorization(address from,address to,uint256 value,"
            b"uint256 validAfter,uint256 validBefore,bytes32 nonce)"
        )
        == TRANSFER_WITH_AUTHORIZATION_TYPEHASH
    )


def test_keccak_is_ethereum_keccak_not_nist_sha3() -> None:
    assert (
        keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    )


@pytest.mark.parametrize(
    ("domain", "expected"),
    [
        (DOMAINS[0], "02fa7265e7c5d81118673727957699e4d68f74cd74b7db77da710fe8a2c7834f"),
        (DOMAINS[1], "71f17a3b2ff373b803d70a5a07c046c1a2bc8e89c09ef722fcb047abe94c9818"),
    ],
)
def test_usdc_domain_separators_match_the_reference(
    domain: tuple[str, str, int, str], expected: str
) -> None:
    name, version, chain_id, address = domain
    assert domain_separator(name, version, chain_id, bytes.fromhex(address[2:])).hex() == expected


@pytest.mark.parametrize(
    "address",  # EIP-55's own test vectors
    [
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    ],
)
def test_checksum_address_eip55_vectors(address: str) -> None:
    assert checksum_address(bytes.fromhex(address[2:])) == address


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=20, max_size=20))
def test_checksum_address_matches_eth_utils(address: bytes) -> None:
    assert checksum_address(address) == to_checksum_address(address)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, SECP256K1_N - 1))
def test_address_of_matches_eth_account(secret: int) -> None:
    key = secret.to_bytes(32, "big")
    assert checksum_address(address_of(key)) == Account.from_key(key).address
    assert PrivateKeySigner(key).address == address_of(key)


@settings(max_examples=1000, deadline=None)
@given(
    secret=st.integers(1, SECP256K1_N - 1),
    domain=st.sampled_from(DOMAINS),
    pay_to=st.binary(min_size=20, max_size=20),
    value=st.integers(0, 2**256 - 1),
    valid_before=st.integers(0, 2**256 - 1),
    nonce=st.binary(min_size=32, max_size=32),
)
def test_signature_is_byte_identical_to_eth_account_and_recovers(
    secret: int,
    domain: tuple[str, str, int, str],
    pay_to: bytes,
    value: int,
    valid_before: int,
    nonce: bytes,
) -> None:
    key = secret.to_bytes(32, "big")
    name, version, chain_id, usdc = domain
    signer = PrivateKeySigner(key)
    digest = transfer_authorization_digest(
        domain_separator(name, version, chain_id, bytes.fromhex(usdc[2:])),
        signer.address,
        pay_to,
        value,
        0,
        valid_before,
        nonce,
    )
    ours = signer.sign_digest(digest)

    theirs = Account.sign_typed_data(
        key,
        {"name": name, "version": version, "chainId": chain_id, "verifyingContract": usdc},
        TRANSFER_TYPES,
        {
            "from": checksum_address(signer.address),
            "to": to_checksum_address(pay_to),
            "value": value,
            "validAfter": 0,
            "validBefore": valid_before,
            "nonce": nonce,
        },
    )
    assert digest == bytes(theirs.message_hash)
    assert ours == bytes(theirs.signature)
    assert ours[64] in (27, 28)
    assert int.from_bytes(ours[32:64], "big") <= SECP256K1_HALF_N
    recovered = coincurve.PublicKey.from_signature_and_message(
        ours[:64] + bytes((ours[64] - 27,)), digest, hasher=None
    )
    assert keccak256(recovered.format(compressed=False)[1:])[12:] == signer.address


def test_sign_digest_function_equals_the_signer() -> None:
    digest = keccak256(b"x402")
    assert sign_digest(TEST_KEY, digest) == PrivateKeySigner(TEST_KEY).sign_digest(digest)


@pytest.mark.parametrize(
    "key", [bytes(32), SECP256K1_N.to_bytes(32, "big"), bytes(31), b"\x01" * 33]
)
def test_invalid_private_keys_are_refused(key: bytes) -> None:
    with pytest.raises(ValueError):
        PrivateKeySigner(key)


@pytest.mark.parametrize("digest", [b"", bytes(31), bytes(33)])
def test_only_32_byte_digests_are_signed(digest: bytes) -> None:
    with pytest.raises(ValueError):
        PrivateKeySigner(TEST_KEY).sign_digest(digest)


def test_digest_refuses_malformed_words() -> None:
    ds = bytes(32)
    with pytest.raises(ValueError):
        transfer_authorization_digest(ds, bytes(20), bytes(20), 1, 0, 1, bytes(31))
    with pytest.raises(ValueError):
        transfer_authorization_digest(ds, bytes(19), bytes(20), 1, 0, 1, bytes(32))
    with pytest.raises(OverflowError):
        transfer_authorization_digest(ds, bytes(20), bytes(20), 2**256, 0, 1, bytes(32))
    with pytest.raises(OverflowError):
        transfer_authorization_digest(ds, bytes(20), bytes(20), -1, 0, 1, bytes(32))


def test_signer_repr_does_not_leak_the_key() -> None:
    text = repr(PrivateKeySigner(TEST_KEY))
    assert TEST_KEY.hex() not in text
    assert "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23" in text
