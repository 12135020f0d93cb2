"""Fixtures for the real chain: one anvil dev chain per test module (a free port, its own data
directory), the sandbox client over it, and a relayer that submits authorizations the way a
facilitator does. Helpers build and sign EIP-3009 authorizations with paysign's own code.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from paysign.chain.devchain import ANVIL_DEV_KEYS, USDC_ADDRESS, Devchain, find_anvil
from paysign.chain.testnet import SandboxChain
from paysign.chain.treasury import Treasury, parse_private_key
from paysign.protocol import (
    AssetRegistry,
    PaymentTerms,
    PrivateKeySigner,
    checksum_address,
    domain_separator,
    parse_signature_request,
)
from paysign.protocol.eip712 import keccak256

USDC_HEX = checksum_address(USDC_ADDRESS)
DOMAIN = domain_separator("USDC", "2", 84532, USDC_ADDRESS)
REGISTRY = AssetRegistry.from_addresses(
    mainnet="0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    mainnet_name="USD Coin",
    testnet=USDC_HEX,
    testnet_name="USDC",
    version="2",
)
RECEIVE_TYPEHASH = keccak256(
    b"ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,"
    b"uint256 validBefore,bytes32 nonce)"
)
CANCEL_TYPEHASH = keccak256(b"CancelAuthorization(address authorizer,bytes32 nonce)")
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


@pytest.fixture(scope="session", autouse=True)
def _anvil_installed() -> None:
    try:
        find_anvil()
    except Exception as exc:  # no skip: CI must not pass silently without the chain
        pytest.fail(f"{exc}", pytrace=False)


@pytest.fixture(scope="module")
def devchain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devchain]:
    with Devchain(tmp_path_factory.mktemp("devchain"), dump_interval=60) as chain:
        yield chain


@pytest.fixture(scope="module")
def chain(devchain: Devchain) -> Iterator[SandboxChain]:
    sandbox = SandboxChain(
        devchain.rpc_url,
        usdc=USDC_ADDRESS,
        treasury_key=devchain.treasury_key,
        lock_path=devchain.data_dir / "testnet-treasury.lock",
    )
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="module")
def relayer(chain: SandboxChain) -> Treasury:
    """anvil account 1: submits authorizations, as a facilitator would."""
    return Treasury(chain.rpc, parse_private_key(ANVIL_DEV_KEYS[1]))


@pytest.fixture
def payer(chain: SandboxChain) -> PrivateKeySigner:
    """A fresh wallet holding 5 test USDC (and no ETH: it never sends a transaction)."""
    signer = PrivateKeySigner(secrets.token_bytes(32))
    chain.send_usdc(signer.address, 5_000_000)
    return signer


def new_address() -> bytes:
    return secrets.token_bytes(20)


def now() -> int:
    return int(time.time())


def payment_terms(pay_to: bytes, amount: int, *, max_timeout: int = 60) -> PaymentTerms:
    """Seller terms for the sandbox network, parsed by paysign as a signing request is."""
    body: dict[str, Any] = {
        "sellerUrl": "https://api.example.com/weather",
        "paymentRequired": {
            "x402Version": 2,
            "resource": {"url": "https://api.example.com/weather"},
            "accepts": [
                {
                    "scheme": "exact",
                    "network": "eip155:84532",
                    "asset": USDC_HEX,
                    "amount": str(amount),
                    "payTo": checksum_address(pay_to),
                    "maxTimeoutSeconds": max_timeout,
                    "extra": {"name": "USDC", "version": "2"},
                }
            ],
        },
    }
    return parse_signature_request(body, REGISTRY).terms


def typed_digest(typehash: bytes, *words: bytes) -> bytes:
    return keccak256(b"\x19\x01" + DOMAIN + keccak256(typehash + b"".join(words)))


def word(value: int | bytes) -> bytes:
    if isinstance(value, int):
        return value.to_bytes(32, "big")
    return value.rjust(32, b"\0")


def high_s(signature: bytes) -> bytes:
    """The same signature's malleable twin: s -> n - s, v flipped. ecrecover accepts it."""
    s = int.from_bytes(signature[32:64], "big")
    v = 55 - signature[64]  # 27 <-> 28
    return signature[:32] + (SECP256K1_N - s).to_bytes(32, "big") + bytes((v,))


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


def state_mtime(data_dir: Path) -> int:
    path = data_dir / "devchain" / "state.json"
    return path.stat().st_mtime_ns if path.exists() else 0
