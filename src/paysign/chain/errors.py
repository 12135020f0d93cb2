"""What can go wrong talking to a chain, from "could not reach it" to "it said no".

``ChainUnavailable`` is also importable from :mod:`paysign.chain.authorizations`, where it was
first defined; it is the same class.
"""

from __future__ import annotations

from typing import Any


class ChainError(Exception):
    """Base class of every chain failure."""


class ChainUnavailable(ChainError):
    """The RPC endpoint failed or answered something that is not a boolean."""


class RpcError(ChainError):
    """The node answered a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{method}: {message} (code {code})")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


class ExecutionReverted(RpcError):
    """A call or gas estimate reverted; ``reason`` is the contract's revert string when it gave
    one (``"FiatTokenV2: authorization is used or canceled"``), else the node's message."""

    def __init__(
        self, method: str, code: int, message: str, data: Any = None, reason: str = ""
    ) -> None:
        super().__init__(method, code, message, data)
        self.reason = reason or message


class TransactionFailed(ChainError):
    """The transaction was mined and reverted (receipt status 0)."""

    def __init__(self, transaction_hash: str, detail: str = "") -> None:
        suffix = f": {detail}" if detail else ""
        super().__init__(f"transaction {transaction_hash} reverted{suffix}")
        self.transaction_hash = transaction_hash


class TransactionPending(ChainError):
    """The transaction may have been broadcast but no receipt came back in time: it can still
    be mined. Do not assume it failed; look it up by ``transaction_hash`` later."""

    def __init__(self, transaction_hash: str, detail: str = "") -> None:
        super().__init__(
            f"no receipt yet for transaction {transaction_hash}{': ' + detail if detail else ''}"
        )
        self.transaction_hash = transaction_hash


class TreasuryNotConfigured(ChainError):
    """Sending test funds needs a treasury key and none is configured for this chain."""
