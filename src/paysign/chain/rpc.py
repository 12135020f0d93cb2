"""A small Ethereum JSON-RPC client over httpx: the calls paysign makes, nothing more.

Thread-safe (one pooled ``httpx.Client``). Every failure is a :class:`ChainError`:
``ChainUnavailable`` when the node cannot be reached or answers garbage, ``RpcError`` for a
JSON-RPC error object, ``ExecutionReverted`` (an ``RpcError``) when a call or a gas estimate
reverts, with the contract's revert string in ``reason``.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from paysign.chain.errors import (
    ChainUnavailable,
    ExecutionReverted,
    RpcError,
    TransactionPending,
)
from paysign.chain.usdc import balance_of_data, decode_revert_reason, decode_uint
from paysign.protocol.eip712 import keccak256
from paysign.protocol.untrusted import untrusted_json

# JSON-RPC "method not found" (and what some gateways say instead) -> fall back to polling.
_METHOD_NOT_FOUND = -32601
_RECEIPT_POLL_SECONDS = 0.05


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def _qty(value: int) -> str:
    return hex(value)


def _from_qty(value: Any) -> int:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ChainUnavailable(f"expected a hex quantity, got {value!r:.40}")
    return int(value, 16)


def _from_data(value: Any) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ChainUnavailable(f"expected hex data, got {value!r:.40}")
    try:
        return bytes.fromhex(value[2:])
    except ValueError:
        raise ChainUnavailable("the node answered malformed hex data") from None


@dataclass(frozen=True, slots=True)
class Log:
    address: bytes
    topics: tuple[bytes, ...]
    data: bytes


@dataclass(frozen=True, slots=True)
class Receipt:
    transaction_hash: str  # 0x-prefixed, lower case
    status: int  # 1 success, 0 reverted
    block_number: int
    gas_used: int
    logs: tuple[Log, ...]

    @property
    def ok(self) -> bool:
        return self.status == 1

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Receipt:
        try:
            return cls(
                transaction_hash=str(raw["transactionHash"]).lower(),
                status=_from_qty(raw["status"]),
                block_number=_from_qty(raw["blockNumber"]),
                gas_used=_from_qty(raw["gasUsed"]),
                logs=tuple(
                    Log(
                        address=_from_data(entry["address"]),
                        topics=tuple(_from_data(t) for t in entry["topics"]),
                        data=_from_data(entry["data"]),
                    )
                    for entry in raw.get("logs") or ()
                ),
            )
        except (KeyError, TypeError) as exc:
            raise ChainUnavailable(f"malformed receipt: {type(exc).__name__}") from None


class JsonRpc:
    """JSON-RPC over HTTP to one node.

    ``send_raw_transaction`` prefers ``eth_sendRawTransactionSync`` (anvil, and nodes that
    implement EIP-7966), which returns the receipt in the same round trip; on a node without it,
    it sends and polls for the receipt instead, and remembers that.
    """

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url
        self._timeout = timeout
        self._http: httpx.Client | None = None  # built on first use: construction is not free
        self._http_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._sync_send: bool | None = None  # unknown until the first send

    def __repr__(self) -> str:
        return f"JsonRpc({self.url!r})"

    def close(self) -> None:
        with self._http_lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    def _client(self) -> httpx.Client:
        with self._http_lock:
            if self._http is None:
                self._http = httpx.Client(timeout=self._timeout)
            return self._http

    def __enter__(self) -> JsonRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, params: list[Any] | None = None) -> Any:
        """One JSON-RPC call; returns ``result``."""
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or []}
        try:
            reply = self._client().post(self.url, json=body)
            reply.raise_for_status()
            answer = untrusted_json(reply.content)
        except (httpx.HTTPError, ValueError) as exc:
            raise ChainUnavailable(f"{method} to the chain failed: {type(exc).__name__}") from None
        if not isinstance(answer, dict):
            raise ChainUnavailable(f"{method}: the node answered something that is not JSON-RPC")
        error = answer.get("error")
        if error is not None:
            raise _rpc_error(method, error)
        if "result" not in answer:
            raise ChainUnavailable(f"{method}: the node answered neither result nor error")
        return answer["result"]

    # ---- reads ----

    def chain_id(self) -> int:
        return _from_qty(self.request("eth_chainId"))

    def block_number(self) -> int:
        return _from_qty(self.request("eth_blockNumber"))

    def balance(self, address: bytes, block: str = "latest") -> int:
        """The native (ETH) balance in wei."""
        return _from_qty(self.request("eth_getBalance", [_hex(address), block]))

    def code(self, address: bytes, block: str = "latest") -> bytes:
        return _from_data(self.request("eth_getCode", [_hex(address), block]))

    def storage_at(self, address: bytes, slot: int, block: str = "latest") -> bytes:
        return _from_data(self.request("eth_getStorageAt", [_hex(address), _qty(slot), block]))

    def transaction_count(self, address: bytes, block: str = "pending") -> int:
        """The account's next nonce (``pending`` counts transactions still in the pool)."""
        return _from_qty(self.request("eth_getTransactionCount", [_hex(address), block]))

    def call(
        self,
        to: bytes,
        data: bytes,
        *,
        sender: bytes | None = None,
        block: str = "latest",
    ) -> bytes:
        """``eth_call``; ``ExecutionReverted`` (with the revert string) when it reverts."""
        tx: dict[str, str] = {"to": _hex(to), "data": _hex(data)}
        if sender is not None:
            tx["from"] = _hex(sender)
        return _from_data(self.request("eth_call", [tx, block]))

    def estimate_gas(
        self, *, sender: bytes, to: bytes | None, data: bytes = b"", value: int = 0
    ) -> int:
        tx: dict[str, str] = {"from": _hex(sender), "data": _hex(data), "value": _qty(value)}
        if to is not None:
            tx["to"] = _hex(to)
        return _from_qty(self.request("eth_estimateGas", [tx]))

    def base_fee(self) -> int:
        block = self.request("eth_getBlockByNumber", ["latest", False])
        if not isinstance(block, dict):
            raise ChainUnavailable("eth_getBlockByNumber: no latest block")
        return _from_qty(block.get("baseFeePerGas", "0x0"))

    def max_priority_fee(self) -> int:
        try:
            return _from_qty(self.request("eth_maxPriorityFeePerGas"))
        except RpcError:
            return 10**9  # 1 gwei where the node does not suggest one

    def erc20_balance(self, token: bytes, owner: bytes) -> int:
        return decode_uint(self.call(token, balance_of_data(owner)))

    def receipt(self, transaction_hash: str) -> Receipt | None:
        raw = self.request("eth_getTransactionReceipt", [transaction_hash])
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise ChainUnavailable("eth_getTransactionReceipt: malformed answer")
        return Receipt.from_json(raw)

    # ---- writes ----

    def send_raw_transaction(self, raw: bytes, *, timeout: float = 30.0) -> Receipt:
        """Broadcast a signed transaction and return its receipt once mined.

        ``ChainUnavailable`` only when the node was never reached (nothing was sent);
        ``TransactionPending`` when the transaction may be out there but no receipt came back
        within ``timeout``; ``RpcError`` when the node refused it (bad nonce, no funds, ...).
        A mined but reverted transaction is returned (``status == 0``), not raised.
        """
        tx_hash = _hex(keccak256(raw))
        if self._sync_send is not False:
            try:
                # EIP-7966 allows a timeout as a second parameter; anvil 1.7 refuses it.
                result = self._send("eth_sendRawTransactionSync", [_hex(raw)], tx_hash)
            except RpcError as exc:
                if exc.code != _METHOD_NOT_FOUND or self._sync_send:
                    raise
                self._sync_send = False
            else:
                self._sync_send = True
                if not isinstance(result, dict):
                    raise TransactionPending(tx_hash, "malformed receipt")
                return Receipt.from_json(result)
        self._send("eth_sendRawTransaction", [_hex(raw)], tx_hash)
        deadline = time.monotonic() + timeout
        while True:
            try:
                receipt = self.receipt(tx_hash)
            except ChainUnavailable:
                receipt = None
            if receipt is not None:
                return receipt
            if time.monotonic() >= deadline:
                raise TransactionPending(tx_hash, f"not mined within {timeout:g} s")
            time.sleep(_RECEIPT_POLL_SECONDS)

    def _send(self, method: str, params: list[Any], tx_hash: str) -> Any:
        try:
            return self.request(method, params)
        except ChainUnavailable as exc:
            # Connection refused: nothing left this process. Anything later (a timeout, a
            # dropped reply) may have reached the node: the transaction can still be mined.
            if isinstance(exc.__context__, httpx.ConnectError | httpx.ConnectTimeout):
                raise
            raise TransactionPending(tx_hash, str(exc)) from None
        except RpcError as exc:
            if "timeout" in exc.message.lower() or "timed out" in exc.message.lower():
                raise TransactionPending(tx_hash, exc.message) from None
            raise


def _rpc_error(method: str, error: Any) -> RpcError:
    if not isinstance(error, dict):
        return RpcError(method, 0, str(error)[:200])
    raw_code = error.get("code")
    code = raw_code if isinstance(raw_code, int) else 0
    message = str(error.get("message", ""))[:500]
    data = error.get("data")
    if code == 3 or message.startswith("execution reverted"):
        reason = None
        if isinstance(data, str) and data.startswith("0x"):
            try:
                reason = decode_revert_reason(bytes.fromhex(data[2:]))
            except ValueError:
                reason = None
        if reason is None and message.startswith("execution reverted: "):
            reason = message[len("execution reverted: ") :]
        return ExecutionReverted(method, code, message, data, reason or message)
    return RpcError(method, code, message, data)
