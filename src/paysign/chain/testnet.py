"""The sandbox network (``eip155:84532``) as the rest of paysign reaches it.

One object whether the chain is the embedded dev chain or an external Base Sepolia endpoint:
``Runtime.sandbox_chain`` (see :mod:`paysign.bootstrap`) is built from
``settings.testnet_rpc_url`` / ``testnet_treasury_key`` / ``usdc_testnet``, which ``paysign
serve`` points at its dev chain when it started one. Creating it opens no connection.

anvil keeps the chain in memory and saves it only now and then (:mod:`paysign.chain.devchain`),
so on the dev chain each test-funds transfer saves the chain's state once it is mined, before
it is reported: a grant answered survives anvil being killed (its 24-hour window, in the
database, survives too). A save takes a few milliseconds, on the caller's thread (the faucet's
worker thread, never the event loop).

    >>> chain = SandboxChain("http://127.0.0.1:1", usdc=bytes(20), treasury_key=None)
    >>> chain.network, chain.treasury is None
    ('eip155:84532', True)
    >>> chain.close()
"""

from __future__ import annotations

from pathlib import Path

import structlog

from paysign.chain.devchain_files import running_state_file, save_state
from paysign.chain.errors import ChainError, TreasuryNotConfigured
from paysign.chain.relay import (
    TransferAuthorization,
    latest_block_time,
    submit_transfer_authorization,
)
from paysign.chain.rpc import JsonRpc, Receipt
from paysign.chain.treasury import Treasury, parse_private_key
from paysign.chain.usdc import authorization_state_data, decode_bool
from paysign.config import Settings
from paysign.protocol import checksum_address, parse_address

TREASURY_LOCK_NAME = "testnet-treasury.lock"

log = structlog.get_logger("paysign.chain")


#: How long a balance read may take before it counts as the chain being unavailable.
READ_TIMEOUT_SECONDS = 2.0


def treasury_lock_path(data_dir: Path) -> Path:
    """The file every process on this machine locks around a treasury send."""
    return data_dir / TREASURY_LOCK_NAME


class SandboxChain:
    """JSON-RPC to the sandbox network, its USDC contract, and (when a key is configured) the
    treasury that sends test funds. Thread-safe; blocking (call it from a worker thread in
    async code)."""

    network = "eip155:84532"
    chain_id = 84532

    def __init__(
        self,
        rpc_url: str,
        *,
        usdc: bytes,
        treasury_key: bytes | None,
        lock_path: Path | None = None,
        timeout: float = 10.0,
        state_file: Path | None = None,
    ) -> None:
        self.rpc_url = rpc_url
        #: Where the dev chain is saved after each transfer; None for any other chain.
        self.state_file = state_file
        self.rpc = JsonRpc(rpc_url, timeout=timeout)
        # Balance reads are answered at once by a healthy node; someone (a portal page) may be
        # waiting on them, so they get a client of their own with a short timeout, while
        # sends keep the long one.
        self._reads = JsonRpc(rpc_url, timeout=min(timeout, READ_TIMEOUT_SECONDS))
        self.usdc = usdc
        self.treasury = (
            Treasury(self.rpc, treasury_key, lock_path=lock_path)
            if treasury_key is not None
            else None
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxChain | None:
        """None when no sandbox chain is configured (``testnet_rpc_url`` unset)."""
        if not settings.testnet_rpc_url:
            return None
        key = settings.testnet_treasury_key
        return cls(
            settings.testnet_rpc_url,
            usdc=parse_address(settings.usdc_testnet),
            treasury_key=parse_private_key(key) if key else None,
            lock_path=treasury_lock_path(settings.data_dir),
            state_file=running_state_file(settings.data_dir, settings.testnet_rpc_url),
        )

    def __repr__(self) -> str:
        return f"SandboxChain({self.rpc_url!r}, usdc={self.usdc_hex})"

    @property
    def usdc_hex(self) -> str:
        return checksum_address(self.usdc)

    def usdc_balance(self, owner: bytes) -> int:
        """USDC base units held by ``owner``."""
        return self._reads.erc20_balance(self.usdc, owner)

    def authorization_used(self, authorizer: bytes, nonce: bytes) -> bool:
        """USDC's ``authorizationState``: True once the nonce was used or cancelled."""
        return decode_bool(self.rpc.call(self.usdc, authorization_state_data(authorizer, nonce)))

    def send_usdc(self, to: bytes, amount: int) -> Receipt:
        """Transfer ``amount`` base units from the treasury to ``to``; the mined receipt
        (status 1). Raises ``TreasuryNotConfigured`` without a key, else as ``Treasury.send``."""
        if self.treasury is None:
            raise TreasuryNotConfigured(
                "no treasury key is configured for the sandbox chain "
                "(set PAYSIGN_TESTNET_TREASURY_KEY)"
            )
        receipt = self.treasury.transfer_token(self.usdc, to, amount)
        self._save_state()
        return receipt

    def block_time(self) -> int:
        """The newest block's timestamp: the chain's clock for an authorization's validity."""
        return latest_block_time(self.rpc)

    def relay_transfer(self, authorization: TransferAuthorization) -> Receipt:
        """Submit a holder's signed ``transferWithAuthorization`` from the treasury, which pays
        its gas; the mined receipt. Raises ``TreasuryNotConfigured`` without a treasury key,
        else as ``Treasury.send``."""
        if self.treasury is None:
            raise TreasuryNotConfigured(
                "no treasury key is configured for the sandbox chain "
                "(set PAYSIGN_TESTNET_TREASURY_KEY)"
            )
        receipt = submit_transfer_authorization(self.treasury, self.usdc, authorization)
        self._save_state()
        return receipt

    def _save_state(self) -> None:
        if self.state_file is None:
            return
        try:
            save_state(self.rpc, self.state_file)
        except (ChainError, OSError) as exc:
            # The transfer is mined and stays so while anvil runs; the dev chain's next
            # periodic dump saves it. Refusing a grant already made would be worse.
            log.warning("devchain_state_not_saved", error=str(exc))

    def close(self) -> None:
        self.rpc.close()
        self._reads.close()
