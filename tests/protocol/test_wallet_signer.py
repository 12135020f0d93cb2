"""The hot path's signer (raw libsecp256k1, known address) is byte-identical to eth-account."""

from __future__ import annotations

import pytest
from eth_account import Account
from hypothesis import given, settings
from hypothesis import strategies as st

from paysign.custody import SECP256K1_ORDER
from paysign.protocol import PrivateKeySigner, WalletSigner, address_of

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
