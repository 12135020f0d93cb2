"""The wallet's USDC on Base, read from the operator's mainnet RPC endpoint for the holder's
overview. Only reads: it holds no key and sends nothing.

    >>> settings = Settings(mainnet_rpc_url=None)
    >>> LiveUsdc.from_settings(settings) is None  # no endpoint configured: nothing to read
    True
"""

from __future__ import annotations

from paysign.chain.rpc import JsonRpc
from paysign.config import Settings
from paysign.protocol import parse_address

#: The overview waits on this read; a slow endpoint shows "unavailable" rather than a slow page.
READ_TIMEOUT_SECONDS = 2.0


class LiveUsdc:
    """USDC balances on Base mainnet. Blocking; raises ``ChainError`` when the node fails."""

    network = "eip155:8453"

    def __init__(self, rpc_url: str, *, usdc: bytes) -> None:
        self.rpc = JsonRpc(rpc_url, timeout=READ_TIMEOUT_SECONDS)
        self.usdc = usdc

    @classmethod
    def from_settings(cls, settings: Settings) -> LiveUsdc | None:
        """None unless ``PAYSIGN_MAINNET_RPC_URL`` is set."""
        if not settings.mainnet_rpc_url:
            return None
        return cls(settings.mainnet_rpc_url, usdc=parse_address(settings.usdc_mainnet))

    def __repr__(self) -> str:
        return f"LiveUsdc({self.rpc.url!r})"

    def usdc_balance(self, owner: bytes) -> int:
        """USDC base units held by ``owner`` on Base."""
        return self.rpc.erc20_balance(self.usdc, owner)

    def close(self) -> None:
        self.rpc.close()
