"""The treasury: the one account that sends transactions (test funds; on the dev chain it also
owns the token and mints to itself).

Nonces. Every send holds a lock from "read the nonce" to "receipt in hand": a ``threading.Lock``
for the threads of this process and an ``fcntl.flock`` on a lock file for the other processes
on this machine (two ``paysign serve`` sharing a data directory). Inside it the nonce is the
node's own ``eth_getTransactionCount(treasury, "pending")``, read afresh for every transaction.
We chose that over a counter kept in memory: the node is the only authority that survives a
restart, a reverted or dropped transaction, another process, or the dev chain being reset, and
the read costs one round trip (~0.5 ms on anvil). Because the receipt is awaited inside the lock,
the pending count is never behind a transaction we sent, so two sends never share a nonce and
none arrives out of order (anvil keeps out-of-order nonces stuck in its pool, foundry#10122).
If something outside paysign spends from the same key, the node refuses the stale nonce and the
send is retried with a fresh one. Across hosts (many servers on one external chain) a file lock
does not reach: pass ``lock`` (any context manager, e.g. a database advisory lock) or give each
host its own treasury key.

Throughput is one transaction per block while the lock is held: instant on anvil's automine,
about one every 2 s on Base Sepolia, ample for test funds.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from paysign.chain.errors import RpcError, TransactionFailed
from paysign.chain.rpc import JsonRpc, Receipt
from paysign.chain.transactions import sign_eip1559_transaction
from paysign.chain.usdc import transfer_data
from paysign.protocol.eip712 import PrivateKeySigner, checksum_address

_NONCE_RETRIES = 3
_STALE_NONCE_HINTS = ("nonce too low", "already known", "replacement transaction underpriced")


def parse_private_key(text: str) -> bytes:
    """32 bytes from a hex private key, with or without ``0x``; ``ValueError`` otherwise."""
    body = text.strip()
    body = body[2:] if body[:2] in ("0x", "0X") else body
    try:
        key = bytes.fromhex(body)
    except ValueError:
        raise ValueError("a private key is 32 bytes of hex") from None
    if len(key) != 32:
        raise ValueError("a private key is 32 bytes of hex")
    return key


class FileLock:
    """A re-usable exclusive lock: threads of this process, then processes through ``flock``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread_lock = threading.Lock()

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._thread_lock:
            # 0700: the lock sits in the data directory, which may not exist yet.
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the flock


class Treasury:
    """Signs and sends transactions from one key, one at a time (see the module docstring)."""

    def __init__(
        self,
        rpc: JsonRpc,
        private_key: bytes,
        *,
        lock_path: Path | None = None,
        lock: AbstractContextManager[object] | None = None,
        receipt_timeout: float = 30.0,
    ) -> None:
        self.rpc = rpc
        self._signer = PrivateKeySigner(private_key)
        self.address: bytes = self._signer.address
        self._thread_lock = threading.Lock()
        self._file_lock = FileLock(lock_path) if lock_path is not None else None
        self._external_lock = lock
        self._receipt_timeout = receipt_timeout
        self._chain_id: int | None = None
        #: Sends re-signed because the node refused a stale nonce (someone else used the key).
        self.nonce_retries = 0

    def __repr__(self) -> str:  # never show the key
        return f"Treasury(address={checksum_address(self.address)}, rpc={self.rpc.url!r})"

    @property
    def address_hex(self) -> str:
        return checksum_address(self.address)

    @contextmanager
    def _serialized(self) -> Iterator[None]:
        with self._thread_lock:
            if self._external_lock is not None:
                with self._external_lock:
                    yield
            elif self._file_lock is not None:
                with self._file_lock():
                    yield
            else:
                yield

    def send(
        self, to: bytes | None, data: bytes = b"", *, value: int = 0, gas: int | None = None
    ) -> Receipt:
        """Send one transaction and wait for it to be mined; the receipt has status 1.

        Raises ``ExecutionReverted`` when the gas estimate shows it would revert (nothing is
        sent), ``TransactionFailed`` when it was mined and reverted, ``TransactionPending``
        when its fate is unknown, ``ChainUnavailable`` when the node cannot be reached.
        """
        with self._serialized():
            if self._chain_id is None:
                self._chain_id = self.rpc.chain_id()
            if gas is None:
                estimate = self.rpc.estimate_gas(sender=self.address, to=to, data=data, value=value)
                gas = estimate + estimate // 4 + 10_000
            priority = self.rpc.max_priority_fee()
            max_fee = 2 * self.rpc.base_fee() + priority
            for attempt in range(_NONCE_RETRIES):
                nonce = self.rpc.transaction_count(self.address, "pending")
                signed = sign_eip1559_transaction(
                    self._signer,
                    chain_id=self._chain_id,
                    nonce=nonce,
                    max_priority_fee_per_gas=priority,
                    max_fee_per_gas=max_fee,
                    gas=gas,
                    to=to,
                    value=value,
                    data=data,
                )
                try:
                    receipt = self.rpc.send_raw_transaction(
                        signed.raw, timeout=self._receipt_timeout
                    )
                except RpcError as exc:
                    stale = any(hint in exc.message.lower() for hint in _STALE_NONCE_HINTS)
                    if not stale or attempt == _NONCE_RETRIES - 1:
                        raise
                    self.nonce_retries += 1
                    continue
                break
        if not receipt.ok:
            raise TransactionFailed(receipt.transaction_hash)
        return receipt

    def transfer_token(self, token: bytes, to: bytes, amount: int) -> Receipt:
        """ERC-20 ``transfer`` from the treasury (test funds: ``token`` is the USDC contract)."""
        return self.send(token, transfer_data(to, amount))
