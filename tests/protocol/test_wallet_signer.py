"""The hot path's signer (raw libsecp256k1, known address) is byte-identical to eth-account."""

from __future__ import annotations

import pytest
from eth_account import Account
from hypothesis import given, settings
from hypothesis import strategies as st

from paysign.custody import SECP256K1_ORDER
from paysign.protocol import PrivateKeySigner, WalletSigner, address_of
from paysign.protocol.eip712 import sign_with_key

keys = st.integers(min_value=1, max_value=SECP256K1_ORDER - 1).map(lambda k: k.to_bytes(32, "big"))
digests = st.binary(min_size=32, max_size=32)


@settings(max_examples=1000, deadline=None)
@given(key=keys, digest=digests)
def test_wallet_signer_matches_eth_account_and_the_object_signer(key: bytes, digest: bytes) -> None:
    signature = WalletSigner(key, address_of(key)).sign_digest(digest)
    assert signature == PrivateKeySigner(key).sign_digest(digest)
    expected = Account.unsafe_sign_hash(digest, key).signature
    assert signature == bytes(expected)


@pytest.mark.parametrize("key", [bytes(32), SECP256K1_ORDER.to_bytes(32, "big"), b"\x01" * 31])
def test_wallet_signer_refuses_invalid_keys(key: bytes) -> None:
    with pytest.raises(ValueError):
        WalletSigner(key, bytes(20))


@pytest.mark.parametrize("digest", [b"", bytes(31), bytes(33)])
def test_wallet_signer_signs_only_32_byte_digests(digest: bytes) -> None:
    key = bytes(31) + b"\x07"
    with pytest.raises(ValueError, match="32 bytes"):
        WalletSigner(key, address_of(key)).sign_digest(digest)


@pytest.mark.parametrize(
    ("key", "digest"),
    [(bytes(31) + b"\x07", bytes(31)), (bytes(31) + b"\x07", bytes(64)), (b"\x07", bytes(32))],
)
def test_raw_signing_never_reads_past_a_short_buffer(key: bytes, digest: bytes) -> None:
    # libsecp256k1 would read 32 bytes whatever it is handed: lengths are checked first.
    with pytest.raises(ValueError, match="32 bytes"):
        sign_with_key(key, digest)


def test_raw_signing_says_none_for_a_key_libsecp256k1_refuses() -> None:
    assert sign_with_key(SECP256K1_ORDER.to_bytes(32, "big"), bytes(32)) is None
    key = bytes(31) + b"\x07"
    assert sign_with_key(key, bytes(32)) == PrivateKeySigner(key).sign_digest(bytes(32))
