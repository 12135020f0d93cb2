"""The dashboard's view of the wallet on the chains: its USDC balance on the sandbox chain and,
where the operator configured a Base RPC endpoint, on Base, read live; and test funds from the
faucet. All wait on the network, so none runs inside a database transaction."""

from __future__ import annotations

import structlog

from paysign.chain.errors import ChainError
from paysign.errors import AccountNotFound
from paysign.protocol import parse_address
from paysign.services import faucet
from paysign.services.portal_deps import PortalDeps
from paysign.store import portal_repo

log = structlog.get_logger("paysign.portal")


def configured(deps: PortalDeps) -> bool:
    return deps.sandbox_chain is not None


def balance(deps: PortalDeps, address: str | None) -> int | None:
    """The wallet's USDC on the sandbox chain in base units; ``None`` when it cannot be read
    (no chain configured, the node down or slow), which the page says rather than fail."""
    chain = deps.sandbox_chain
    if chain is None or address is None:
        return None
    try:
        # Short: the chain's reads give up after READ_TIMEOUT_SECONDS.
        return chain.usdc_balance(parse_address(address))
    except (ChainError, ValueError) as exc:
        log.info("testnet_balance_unavailable", error=type(exc).__name__)
        return None


def live_configured(deps: PortalDeps) -> bool:
    return deps.live_usdc is not None


def live_balance(deps: PortalDeps, address: str | None) -> int | None:
    """The wallet's USDC on Base in base units; ``None`` when it cannot be read (no endpoint
    configured, the node down or slow), which the page says rather than fail."""
    chain = deps.live_usdc
    if chain is None or address is None:
        return None
    try:
        return chain.usdc_balance(parse_address(address))
    except (ChainError, ValueError) as exc:
        log.info("mainnet_balance_unavailable", error=type(exc).__name__)
        return None


def request_test_funds(deps: PortalDeps, account_id: str) -> faucet.Grant:
    """Test USDC for the account's wallet, as ``POST /wallets/testnet/funds`` gives it.
    Raises ``FaucetRateLimited``, ``SandboxChainUnavailable`` or ``FaucetTransferPending``."""
    with deps.db.read() as conn:
        holder = portal_repo.wallet_holder(conn, account_id)
    if holder is None:
        raise AccountNotFound("the signed-in account has no wallet")
    return faucet.request_test_funds(
        deps.db, deps.clock, deps.sandbox_chain, holder, amount=deps.test_funds_amount
    )
