"""A payment the buyer SDK made, as its callers and its exceptions see it.

A leaf of the SDK: the auth flow creates payments and the exceptions carry them, so it
imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from paysign.protocol.payment_required import Settlement
from paysign.protocol.usdc import format_usdc

__all__ = ["Payment"]


@dataclass(frozen=True, slots=True)
class Payment:
    """A payment the client made: what was signed, and the seller's receipt."""

    seller_url: str
    x402_version: int
    network: str  # CAIP-2
    amount: int  # USDC base units
    asset: str
    pay_to: str
    sandbox: bool
    nonce: str  # the EIP-3009 authorization nonce (0x + 64 hex)
    valid_before: int
    attempts: int  # how often the paid request was sent (same signature each time)
    settlement: Settlement | None  # None when the seller sent no receipt

    @property
    def transaction(self) -> str | None:
        """The settlement's transaction hash, if the seller settled and said so."""
        if self.settlement is None or not self.settlement.transaction:
            return None
        return self.settlement.transaction

    @property
    def usdc(self) -> str:
        return format_usdc(self.amount)
