"""A second anvil chain with Base's chain id (8453), for what needs a mainnet RPC: the dev
chain's test USDC code is copied to Circle's Base address, so ``authorizationState`` answers
there as it does on the sandbox chain."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import sha3

from conftest import free_port
from paysign.chain.devchain import USDC_ADDRESS, find_anvil
from paysign.config import BASE_MAINNET_USDC

BASE_CHAIN_ID = 8453
_START_SECONDS = 30  # a bound for a hung start, not a timing assertion


def rpc(url: str, method: str, params: list[Any]) -> Any:
    answer = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return answer.json()["result"]


@contextmanager
def base_mainnet_chain(sandbox_rpc_url: str) -> Iterator[str]:
    """The RPC URL of a fresh anvil with chain id 8453 and USDC at Base's address."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    chain = subprocess.Popen(
        [str(find_anvil()), "--chain-id", str(BASE_CHAIN_ID), "--port", str(port), "--silent"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + _START_SECONDS
        while True:
            try:
                assert rpc(url, "eth_chainId", []) == hex(BASE_CHAIN_ID)
                break
            except httpx.TransportError:
                assert chain.poll() is None and time.monotonic() < deadline, "anvil did not start"
                time.sleep(0.05)
        code = rpc(sandbox_rpc_url, "eth_getCode", ["0x" + USDC_ADDRESS.hex(), "latest"])
        rpc(url, "anvil_setCode", [BASE_MAINNET_USDC, code])
        yield url
    finally:
        chain.terminate()
        chain.wait(timeout=_START_SECONDS)


#: The dev chain's TestUSDC storage: slot 0 owner, 1 totalSupply, 2 the balances mapping.
BALANCES_SLOT = 2


def set_usdc_balance(url: str, owner: bytes, amount: int) -> None:
    """Write ``_balances[owner]`` of the token at Base's USDC address on ``url`` (a
    ``base_mainnet_chain``): its slot is keccak256(owner word ++ mapping slot word)."""
    word = owner.rjust(32, b"\0") + BALANCES_SLOT.to_bytes(32, "big")
    slot = "0x" + sha3.keccak_256(word).hexdigest()
    rpc(url, "anvil_setStorageAt", [BASE_MAINNET_USDC, slot, "0x" + f"{amount:064x}"])
