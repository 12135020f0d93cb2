"""USDC's ABI as paysign speaks it, and the committed TestUSDC artifact.

The calls paysign makes take fixed-width arguments, so they are encoded by hand: a 4-byte
selector and 32-byte words (plus one dynamic ``bytes`` tail for FiatToken v2.2's
``signature`` overloads).

    >>> balance_of_data(bytes(20)).hex()[:8]
    '70a08231'
    >>> decode_revert_reason(bytes.fromhex(
    ...     "08c379a0" + "20".rjust(64, "0") + "2".rjust(64, "0") + "6869".ljust(64, "0")))
    'hi'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from paysign.protocol.eip712 import keccak256

SignatureForm = Literal["vrs", "bytes"]

#: keccak256("Transfer(address,address,uint256)"): topic 0 of an ERC-20 transfer log.
TRANSFER_TOPIC = keccak256(b"Transfer(address,address,uint256)")
AUTHORIZATION_USED_TOPIC = keccak256(b"AuthorizationUsed(address,bytes32)")
AUTHORIZATION_CANCELED_TOPIC = keccak256(b"AuthorizationCanceled(address,bytes32)")

_ERROR_STRING_SELECTOR = keccak256(b"Error(string)")[:4]


@cache
def selector(signature: str) -> bytes:
    """The 4-byte function selector of a canonical signature such as ``"balanceOf(address)"``."""
    return keccak256(signature.encode("ascii"))[:4]


def uint_word(value: int) -> bytes:
    return value.to_bytes(32, "big")  # OverflowError for negatives and >= 2**256


def address_word(address: bytes) -> bytes:
    if len(address) != 20:
        raise ValueError("an address is 20 bytes")
    return bytes(12) + address


def bytes32_word(value: bytes) -> bytes:
    if len(value) != 32:
        raise ValueError("a bytes32 is 32 bytes")
    return value


def _bytes_tail(data: bytes) -> bytes:
    padding = (-len(data)) % 32
    return uint_word(len(data)) + data + bytes(padding)


def _split_signature(signature: bytes) -> tuple[bytes, bytes, bytes]:
    # r || s || v, as paysign's signers (and eth-account) produce it. v is passed through as is:
    # a v of 0/1 must reach the contract to be refused there, exactly as FiatToken refuses it.
    if len(signature) != 65:
        raise ValueError("a v,r,s signature is 65 bytes")
    return signature[:32], signature[32:64], uint_word(signature[64])


def balance_of_data(owner: bytes) -> bytes:
    return selector("balanceOf(address)") + address_word(owner)


def authorization_state_data(authorizer: bytes, nonce: bytes) -> bytes:
    return (
        selector("authorizationState(address,bytes32)")
        + address_word(authorizer)
        + bytes32_word(nonce)
    )


def transfer_data(to: bytes, amount: int) -> bytes:
    return selector("transfer(address,uint256)") + address_word(to) + uint_word(amount)


def mint_data(to: bytes, amount: int) -> bytes:
    return selector("mint(address,uint256)") + address_word(to) + uint_word(amount)


def _authorization_call(
    name: str,
    from_: bytes,
    to: bytes,
    value: int,
    valid_after: int,
    valid_before: int,
    nonce: bytes,
    signature: bytes,
    form: SignatureForm,
) -> bytes:
    head = (
        address_word(from_)
        + address_word(to)
        + uint_word(value)
        + uint_word(valid_after)
        + uint_word(valid_before)
        + bytes32_word(nonce)
    )
    static = "address,address,uint256,uint256,uint256,bytes32"
    if form == "vrs":
        r, s, v = _split_signature(signature)
        return selector(f"{name}({static},uint8,bytes32,bytes32)") + head + v + r + s
    # One dynamic argument after six static words: its offset is 7 words.
    return selector(f"{name}({static},bytes)") + head + uint_word(7 * 32) + _bytes_tail(signature)


def transfer_with_authorization_data(
    from_: bytes,
    to: bytes,
    value: int,
    valid_after: int,
    valid_before: int,
    nonce: bytes,
    signature: bytes,
    *,
    form: SignatureForm = "vrs",
) -> bytes:
    """Calldata for ``transferWithAuthorization``: the v,r,s form or v2.2's ``bytes`` form."""
    return _authorization_call(
        "transferWithAuthorization",
        from_,
        to,
        value,
        valid_after,
        valid_before,
        nonce,
        signature,
        form,
    )


def receive_with_authorization_data(
    from_: bytes,
    to: bytes,
    value: int,
    valid_after: int,
    valid_before: int,
    nonce: bytes,
    signature: bytes,
    *,
    form: SignatureForm = "vrs",
) -> bytes:
    return _authorization_call(
        "receiveWithAuthorization",
        from_,
        to,
        value,
        valid_after,
        valid_before,
        nonce,
        signature,
        form,
    )


def cancel_authorization_data(
    authorizer: bytes, nonce: bytes, signature: bytes, *, form: SignatureForm = "vrs"
) -> bytes:
    head = address_word(authorizer) + bytes32_word(nonce)
    if form == "vrs":
        r, s, v = _split_signature(signature)
        return selector("cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)") + (
            head + v + r + s
        )
    return (
        selector("cancelAuthorization(address,bytes32,bytes)")
        + head
        + uint_word(3 * 32)
        + _bytes_tail(signature)
    )


def decode_uint(data: bytes) -> int:
    if len(data) != 32:
        raise ValueError(f"expected one 32-byte word, got {len(data)} bytes")
    return int.from_bytes(data, "big")


def decode_bool(data: bytes) -> bool:
    value = decode_uint(data)
    if value > 1:
        raise ValueError("not an ABI bool")
    return value == 1


def decode_address(data: bytes) -> bytes:
    if len(data) != 32 or data[:12] != bytes(12):
        raise ValueError("not an ABI address")
    return data[12:]


def decode_revert_reason(data: bytes) -> str | None:
    """The string of a Solidity ``Error(string)`` revert; ``None`` for anything else."""
    if len(data) < 4 + 64 or data[:4] != _ERROR_STRING_SELECTOR:
        return None
    body = data[4:]
    offset = int.from_bytes(body[:32], "big")
    if offset + 32 > len(body):
        return None
    length = int.from_bytes(body[offset : offset + 32], "big")
    raw = body[offset + 32 : offset + 32 + length]
    if len(raw) != length:
        return None
    return raw.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class ContractArtifact:
    """A compiled contract as ``scripts/compile-contracts`` committed it."""

    name: str
    abi: list[dict[str, Any]]
    bytecode: bytes  # creation code (runs the constructor)
    runtime_bytecode: bytes  # what lives at the address
    storage_slots: dict[str, int]
    compiler: dict[str, Any]


@cache
def load_test_usdc() -> ContractArtifact:
    """The committed TestUSDC artifact (``src/paysign/chain/contracts/TestUSDC.json``)."""
    text = resources.files("paysign.chain").joinpath("contracts/TestUSDC.json").read_text("utf-8")
    raw = json.loads(text)
    return ContractArtifact(
        name=raw["contractName"],
        abi=raw["abi"],
        bytecode=bytes.fromhex(raw["bytecode"][2:]),
        runtime_bytecode=bytes.fromhex(raw["deployedBytecode"][2:]),
        storage_slots={label: int(item["slot"]) for label, item in raw["storage"].items()},
        compiler=raw["compiler"],
    )
