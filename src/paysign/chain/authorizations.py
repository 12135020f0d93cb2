"""Asking a USDC contract whether an EIP-3009 authorization was used: ``authorizationState``.

>>> call_data(bytes.fromhex("11" * 20), bytes(32)).hex()[:8]   # the function selector
'e94a0102'
"""

from __future__ import annotations

from typing import Protocol

import httpx

from paysign.chain.errors import ChainUnavailable
from paysign.protocol.eip712 import keccak256

__all__ = ["AuthorizationStates", "ChainUnavailable", "RpcAuthorizationStates", "call_data"]

_SELECTOR = keccak256(b"authorizationState(address,bytes32)")[:4]


class AuthorizationStates(Protocol):
    @property
    def networks(self) -> frozenset[str]:
        """The CAIP-2 networks this reader can ask."""
        ...

    def is_used(self, network: str, token: bytes, authorizer: bytes, nonce: bytes) -> bool:
        """True when used (or cancelled), False when still open; ``ChainUnavailable`` when the
        chain cannot answer."""
        ...


def call_data(authorizer: bytes, nonce: bytes) -> bytes:
    return _SELECTOR + bytes(12) + authorizer + nonce


class RpcAuthorizationStates:
    """``eth_call`` over JSON-RPC, one endpoint per network (CAIP-2 id → URL)."""

    def __init__(self, urls: dict[str, str], *, timeout: float = 10.0) -> None:
        self.urls = dict(urls)
        self._http = httpx.Client(timeout=timeout)

    @property
    def networks(self) -> frozenset[str]:
        return frozenset(self.urls)

    def is_used(self, network: str, token: bytes, authorizer: bytes, nonce: bytes) -> bool:
        url = self.urls.get(network)
        if url is None:
            raise ChainUnavailable(f"no RPC endpoint is configured for {network}")
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "eth_call",
            "params": [
                {"to": "0x" + token.hex(), "data": "0x" + call_data(authorizer, nonce).hex()},
                "latest",
            ],
        }
        try:
            reply = self._http.post(url, json=request)
            reply.raise_for_status()
            result = reply.json()["result"]
            word = bytes.fromhex(result[2:])
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise ChainUnavailable(
                f"authorizationState call to {network} failed: {type(exc).__name__}"
            ) from None
        if len(word) != 32 or word[:31] != bytes(31) or word[31] > 1:
            raise ChainUnavailable(f"authorizationState on {network} did not return a boolean")
        return word[31] == 1

    def close(self) -> None:
        self._http.close()
