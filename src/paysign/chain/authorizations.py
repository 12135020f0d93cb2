"""Asking a USDC contract whether an EIP-3009 authorization was used (``authorizationState``)
and by which transaction (the ``AuthorizationUsed(authorizer, nonce)`` event it logged).

An RPC provider limits how many blocks one ``eth_getLogs`` may span, so the event is looked for
only where it can be: in blocks stamped from a little before the signature to its
``validBefore`` (the contract refuses the authorization at or after it), found by a binary
search on block timestamps and read in spans of ``LOG_SPAN`` blocks.

>>> call_data(bytes.fromhex("11" * 20), bytes(32)).hex()[:8]   # the function selector
'e94a0102'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

import httpx

from paysign.chain.errors import ChainUnavailable
from paysign.protocol.eip712 import keccak256
from paysign.protocol.untrusted import untrusted_json

__all__ = ["AuthorizationStates", "ChainUnavailable", "RpcAuthorizationStates", "call_data"]

_SELECTOR = keccak256(b"authorizationState(address,bytes32)")[:4]
_AUTHORIZATION_USED = keccak256(b"AuthorizationUsed(address,bytes32)")
#: Blocks per eth_getLogs call: within what common providers accept.
LOG_SPAN = 1_000
#: How long before its recorded signing time a signature's block may be stamped (clock skew).
SKEW_SECONDS = 300


class AuthorizationStates(Protocol):
    @property
    def networks(self) -> frozenset[str]:
        """The CAIP-2 networks this reader can ask."""
        ...

    def is_used(self, network: str, token: bytes, authorizer: bytes, nonce: bytes) -> bool:
        """True when used (or cancelled), False when still open; ``ChainUnavailable`` when the
        chain cannot answer."""
        ...

    def settlement_tx(
        self,
        network: str,
        token: bytes,
        authorizer: bytes,
        nonce: bytes,
        *,
        signed_at: int,
        valid_before: int,
    ) -> str | None:
        """The ``0x`` hash of the transaction that used the authorization, or None when no
        such event is found (a cancelled authorization logs another event);
        ``ChainUnavailable`` when the chain cannot answer."""
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

    def _call(self, network: str, method: str, params: list[object]) -> Any:
        url = self.urls.get(network)
        if url is None:
            raise ChainUnavailable(f"no RPC endpoint is configured for {network}")
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        try:
            reply = self._http.post(url, json=request)
            reply.raise_for_status()
            return untrusted_json(reply.content)["result"]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise ChainUnavailable(
                f"{method} call to {network} failed: {type(exc).__name__}"
            ) from None

    def is_used(self, network: str, token: bytes, authorizer: bytes, nonce: bytes) -> bool:
        data = "0x" + call_data(authorizer, nonce).hex()
        result = self._call(
            network, "eth_call", [{"to": "0x" + token.hex(), "data": data}, "latest"]
        )
        try:
            word = bytes.fromhex(result[2:])
        except (TypeError, ValueError):
            word = b""
        if len(word) != 32 or word[:31] != bytes(31) or word[31] > 1:
            raise ChainUnavailable(f"authorizationState on {network} did not return a boolean")
        return word[31] == 1

    def settlement_tx(
        self,
        network: str,
        token: bytes,
        authorizer: bytes,
        nonce: bytes,
        *,
        signed_at: int,
        valid_before: int,
    ) -> str | None:
        blocks = _BlockClock(lambda number: self._block_time(network, number))
        latest = _quantity(self._call(network, "eth_blockNumber", []))
        first = blocks.first_at_or_after(signed_at - SKEW_SECONDS, latest)
        last = blocks.first_at_or_after(
            valid_before, latest, low=first
        )  # stamped at validBefore: too late
        topics = [
            "0x" + _AUTHORIZATION_USED.hex(),
            "0x" + bytes(12).hex() + authorizer.hex(),
            "0x" + nonce.hex(),
        ]
        for start in range(first, last + 1, LOG_SPAN):
            end = min(start + LOG_SPAN - 1, last)
            found = self._call(
                network,
                "eth_getLogs",
                [
                    {
                        "address": "0x" + token.hex(),
                        "topics": topics,
                        "fromBlock": hex(start),
                        "toBlock": hex(end),
                    }
                ],
            )
            if not isinstance(found, list):
                raise ChainUnavailable(f"eth_getLogs on {network} did not return a list")
            for entry in found:
                tx = entry.get("transactionHash") if isinstance(entry, dict) else None
                if isinstance(tx, str) and _TX_HASH.fullmatch(tx) and not entry.get("removed"):
                    return tx.lower()
        return None

    def _block_time(self, network: str, number: int) -> int:
        block = self._call(network, "eth_getBlockByNumber", [hex(number), False])
        if not isinstance(block, dict):
            raise ChainUnavailable(f"block {number} on {network} is missing")
        return _quantity(block.get("timestamp"))

    def close(self) -> None:
        self._http.close()


_TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}")


def _quantity(value: object) -> int:
    """A JSON-RPC quantity (``"0x1a"``) as an int; ``ChainUnavailable`` for anything else."""
    if isinstance(value, str) and value.startswith("0x"):
        try:
            return int(value, 16)
        except ValueError:
            pass
    raise ChainUnavailable("the chain answered with a malformed number")


class _BlockClock:
    """Which block was the first stamped at or after a time: a binary search over block
    timestamps (they never decrease), each block read at most once.

    >>> times = {0: 100, 1: 110, 2: 110, 3: 130}
    >>> clock = _BlockClock(times.__getitem__)
    >>> clock.first_at_or_after(110, 3), clock.first_at_or_after(111, 3)
    (1, 3)
    >>> clock.first_at_or_after(50, 3), clock.first_at_or_after(500, 3)
    (0, 3)
    """

    def __init__(self, time_of: Callable[[int], int]) -> None:
        self._time_of = time_of
        self._seen: dict[int, int] = {}

    def _time(self, number: int) -> int:
        if number not in self._seen:
            self._seen[number] = self._time_of(number)
        return self._seen[number]

    def first_at_or_after(self, timestamp: int, latest: int, *, low: int = 0) -> int:
        """The block (no earlier than ``low``), or ``latest`` when every block is older."""
        high = latest
        while low < high:
            middle = (low + high) // 2
            if self._time(middle) >= timestamp:
                high = middle
            else:
                low = middle + 1
        return low
