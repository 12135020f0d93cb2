"""Signed EIP-1559 (type 2) transactions, without eth-account: RLP plus one secp256k1 signature.

Tests prove the raw bytes identical to ``eth_account.Account.sign_transaction`` (both sign with
RFC 6979 nonces), so this is the same transaction eth-account would produce.

    >>> rlp_encode([b"cat", b"dog"]).hex()
    'c88363617483646f67'
    >>> rlp_encode(0), rlp_encode(15), rlp_encode(1024)
    (b'\\x80', b'\\x0f', b'\\x82\\x04\\x00')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from paysign.protocol.eip712 import DigestSigner, keccak256

RlpItem = Union[bytes, int, Sequence["RlpItem"]]  # noqa: UP007 -- a recursive alias

_TYPE_EIP1559 = b"\x02"


def _length_prefix(length: int, short_base: int) -> bytes:
    if length < 56:
        return bytes((short_base + length,))
    encoded = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes((short_base + 55 + len(encoded),)) + encoded


def rlp_encode(item: RlpItem) -> bytes:
    """Recursive-length-prefix encoding; ints are minimal big-endian (0 is the empty string)."""
    if isinstance(item, int):
        if item < 0:
            raise ValueError("RLP has no negative integers")
        item = item.to_bytes((item.bit_length() + 7) // 8, "big")
    if isinstance(item, bytes | bytearray):
        if len(item) == 1 and item[0] < 0x80:
            return bytes(item)
        return _length_prefix(len(item), 0x80) + bytes(item)
    payload = b"".join(rlp_encode(element) for element in item)
    return _length_prefix(len(payload), 0xC0) + payload


@dataclass(frozen=True, slots=True)
class SignedTransaction:
    raw: bytes
    hash: bytes  # keccak256 of ``raw``: the transaction hash the chain will report

    @property
    def hash_hex(self) -> str:
        return "0x" + self.hash.hex()


def sign_eip1559_transaction(
    signer: DigestSigner,
    *,
    chain_id: int,
    nonce: int,
    max_priority_fee_per_gas: int,
    max_fee_per_gas: int,
    gas: int,
    to: bytes | None,
    value: int = 0,
    data: bytes = b"",
) -> SignedTransaction:
    """A signed type-2 transaction with an empty access list (``to=None`` creates a contract)."""
    if to is not None and len(to) != 20:
        raise ValueError("an address is 20 bytes")
    fields: list[RlpItem] = [
        chain_id,
        nonce,
        max_priority_fee_per_gas,
        max_fee_per_gas,
        gas,
        b"" if to is None else to,
        value,
        data,
        [],
    ]
    signature = signer.sign_digest(keccak256(_TYPE_EIP1559 + rlp_encode(fields)))
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    y_parity = signature[64] - 27
    raw = _TYPE_EIP1559 + rlp_encode([*fields, y_parity, r, s])
    return SignedTransaction(raw=raw, hash=keccak256(raw))
