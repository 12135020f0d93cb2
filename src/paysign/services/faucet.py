"""``request_test_funds``: 10 test USDC from the sandbox treasury, once per rolling 24 hours.

The window is claimed in the database before the transfer (one guarded upsert, so any
number of simultaneous requests make exactly one transfer) and becomes a grant only when the
transfer is mined. A transfer that fails gives the window back; one that may still be mined
keeps it (the funds are most likely on their way) and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from paysign.chain.errors import ChainError, TransactionPending, TreasuryNotConfigured
from paysign.chain.testnet import SandboxChain
from paysign.clock import Clock
from paysign.errors import FaucetRateLimited, FaucetTransferPending, SandboxChainUnavailable
from paysign.metrics import treasury_balance
from paysign.policy.caps import iso
from paysign.protocol import parse_address
from paysign.store import faucet_repo
from paysign.store.database import Database
from paysign.store.repositories import KeyHolder

GRANT_WINDOW_SECONDS = 24 * 3600
# A claim older than this is taken to be from a process that died mid-transfer.
STALE_CLAIM_SECONDS = 300
IN_PROGRESS_RETRY_SECONDS = 5

log = structlog.get_logger("paysign.faucet")


@dataclass(frozen=True, slots=True)
class Grant:
    transaction_hash: str
    network: str
    token: str


def request_test_funds(
    db: Database, clock: Clock, chain: SandboxChain | None, holder: KeyHolder, *, amount: int
) -> Grant:
    if chain is None:
        raise SandboxChainUnavailable(
            "this paysign has no sandbox chain configured (PAYSIGN_TESTNET_RPC_URL)"
        )
    now = clock.now()
    with db.write() as conn:
        claimed = faucet_repo.try_claim(
            conn,
            holder.account_id,
            now,
            window=GRANT_WINDOW_SECONDS,
            stale=STALE_CLAIM_SECONDS,
        )
        window = None if claimed else faucet_repo.window_of(conn, holder.account_id)
    if window is not None:
        raise _refusal(window, now)

    try:
        receipt = chain.send_usdc(parse_address(holder.wallet_address), amount)
    except TransactionPending as pending:
        with db.write() as conn:
            faucet_repo.record_grant(
                conn, holder.account_id, pending.transaction_hash, amount, "pending", now
            )
        raise FaucetTransferPending(
            f"the transfer {pending.transaction_hash} was sent but is not confirmed yet; "
            "it will most likely arrive, so the 24-hour window counts from now",
            transactionHash=pending.transaction_hash,
        ) from None
    except (ChainError, TreasuryNotConfigured) as exc:
        with db.write() as conn:
            faucet_repo.release_claim(conn, holder.account_id)
        log.warning("test_funds_failed", error=type(exc).__name__)
        raise SandboxChainUnavailable(
            "the sandbox chain did not take the transfer; nothing was sent and the 24-hour "
            "window is not used. Try again shortly."
        ) from None
    with db.write() as conn:
        faucet_repo.record_grant(
            conn, holder.account_id, receipt.transaction_hash, amount, "granted", now
        )
    _record_treasury_balance(chain)
    return Grant(receipt.transaction_hash, chain.network, chain.usdc_hex)


def _record_treasury_balance(chain: SandboxChain) -> None:
    """The treasury's balance for the metrics: read once per grant, the only time it moves
    (grants are rare), so a scrape never costs an RPC call."""
    if chain.treasury is None:
        return
    try:
        balance = chain.usdc_balance(chain.treasury.address)
    except ChainError as exc:  # the grant is made; only the gauge stays as it was
        log.warning("treasury_balance_unread", error=type(exc).__name__)
        return
    treasury_balance(chain.network, balance)


def _refusal(window: faucet_repo.FundsWindow, now: int) -> FaucetRateLimited:
    if window.last_granted_at is not None and window.last_granted_at > now - GRANT_WINDOW_SECONDS:
        next_at = window.last_granted_at + GRANT_WINDOW_SECONDS
        return FaucetRateLimited(
            f"test funds were granted at {iso(window.last_granted_at)}; the next grant is "
            f"possible at {iso(next_at)}",
            retry_after=max(next_at - now, 1),
        )
    return FaucetRateLimited(
        "a test-funds transfer for this account is in progress; its result decides whether "
        "another grant is possible",
        retry_after=IN_PROGRESS_RETRY_SECONDS,
    )
