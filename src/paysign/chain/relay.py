"""Submitting a signed EIP-3009 ``transferWithAuthorization`` from an account that pays the gas:
the sandbox treasury, or on Base mainnet a configured relayer key.

The wallet that authorizes the transfer never sends a transaction itself (it holds USDC, not
ETH): it signs the authorization, and the relayer carries it to the USDC contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from paysign.chain.rpc import JsonRpc, Receipt
from paysign.chain.treasury import Treasury, parse_private_key
from paysign.chain.usdc import transfer_with_authorization_data
from paysign.config import Settings
from paysign.protocol import parse_address

RELAYER_LOCK_NAME = "mainnet-relayer.lock"


@dataclass(frozen=True, slots=True)
class TransferAuthorization:
    """A signed ``TransferWithAuthorization`` (EIP-3009), ready to submit."""

    from_: bytes
    to: bytes
    value: int
    valid_after: int
    valid_before: int
    nonce: bytes
    signature: bytes  # r || s || v


def submit_transfer_authorization(
    sender: Treasury, token: bytes, authorization: TransferAuthorization
) -> Receipt:
    """Send the authorization to ``token`` from ``sender`` and wait for it to be mined; raises
    as ``Treasury.send`` (``ExecutionReverted`` when it would revert: nothing is sent)."""
    data = transfer_with_authorization_data(
        authorization.from_,
        authorization.to,
        authorization.value,
        authorization.valid_after,
        authorization.valid_before,
        authorization.nonce,
        authorization.signature,
    )
    return sender.send(token, data)


def latest_block_time(rpc: JsonRpc) -> int:
    """The timestamp of the newest block: the chain's own clock, which decides whether an
    authorization's ``validBefore`` has passed."""
    block = rpc.request("eth_getBlockByNumber", ["latest", False])
    return int(block["timestamp"], 16)


class RelayChain(Protocol):
    """A network a withdrawal can be sent on."""

    @property
    def network(self) -> str: ...
    @property
    def chain_id(self) -> int: ...
    @property
    def usdc(self) -> bytes: ...

    def usdc_balance(self, owner: bytes) -> int: ...
    def block_time(self) -> int: ...
    def relay_transfer(self, authorization: TransferAuthorization) -> Receipt: ...


class MainnetRelay:
    """Base mainnet, its USDC and the relayer that pays gas for withdrawals. Blocking."""

    network = "eip155:8453"
    chain_id = 8453

    def __init__(
        self, rpc_url: str, *, usdc: bytes, relayer_key: bytes, lock_path: Path | None = None
    ) -> None:
        self.rpc = JsonRpc(rpc_url)
        self.usdc = usdc
        self.relayer = Treasury(self.rpc, relayer_key, lock_path=lock_path)

    @classmethod
    def from_settings(cls, settings: Settings) -> MainnetRelay | None:
        """None unless both the mainnet RPC endpoint and the relayer key are configured."""
        if not settings.mainnet_rpc_url or not settings.mainnet_relayer_key:
            return None
        return cls(
            settings.mainnet_rpc_url,
            usdc=parse_address(settings.usdc_mainnet),
            relayer_key=parse_private_key(settings.mainnet_relayer_key),
            lock_path=settings.data_dir / RELAYER_LOCK_NAME,
        )

    def __repr__(self) -> str:  # never show the key
        return f"MainnetRelay({self.rpc.url!r}, relayer={self.relayer.address_hex})"

    def usdc_balance(self, owner: bytes) -> int:
        return self.rpc.erc20_balance(self.usdc, owner)

    def block_time(self) -> int:
        return latest_block_time(self.rpc)

    def relay_transfer(self, authorization: TransferAuthorization) -> Receipt:
        return submit_transfer_authorization(self.relayer, self.usdc, authorization)

    def close(self) -> None:
        self.rpc.close()
