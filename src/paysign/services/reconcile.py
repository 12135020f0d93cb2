"""Accurate spend: release the cap reservation of signatures that expired unused.

A signature past its ``validBefore`` can never settle. If the USDC contract says its nonce was
never used, the amount goes back to the day and month windows it was counted in; if it was
used, the signature is marked settled. Networks without an RPC endpoint are skipped, so their
signed spend stays counted: failing toward under-spending, never over.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from paysign.chain.authorizations import AuthorizationStates, ChainUnavailable
from paysign.clock import Clock
from paysign.metrics import reconcile_succeeded
from paysign.policy.caps import windows_at
from paysign.protocol.networks import parse_address
from paysign.store import policy_repo
from paysign.store import repositories as repo
from paysign.store.database import Database

log = structlog.get_logger("paysign.reconcile")


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    settled: int = 0
    expired: int = 0
    released: int = 0  # base units returned to spend windows
    interrupted: bool = False  # the chain stopped answering; the rest waits for the next pass

    def as_dict(self) -> dict[str, int | bool]:
        return {
            "settled": self.settled,
            "expired": self.expired,
            "released": self.released,
            "interrupted": self.interrupted,
        }


def reconcile(
    db: Database,
    clock: Clock,
    chain: AuthorizationStates,
    *,
    grace_seconds: int = 120,
    batch: int = 500,
) -> ReconcileReport:
    """One pass over every signature past ``validBefore + grace`` still ``signed``, on the
    networks the chain reader can ask."""
    settled = expired = released = 0
    cutoff = clock.now() - grace_seconds
    last_id = 0
    networks = chain.networks
    while networks:
        with db.read() as conn:
            due = repo.signatures_due(
                conn, networks=networks, expired_before=cutoff, after_id=last_id, limit=batch
            )
        for signature in due:
            last_id = signature.id
            try:
                used = chain.is_used(
                    signature.network,
                    parse_address(signature.asset),
                    parse_address(signature.wallet_address),
                    signature.nonce,
                )
            except ChainUnavailable as exc:
                log.warning("reconcile_interrupted", network=signature.network, error=str(exc))
                return _report(settled, expired, released, interrupted=True)
            with db.write() as conn:
                if not repo.conclude_signature(
                    conn, signature.id, "settled" if used else "expired"
                ):
                    continue  # another reconciler got there first
                if used:
                    settled += 1
                    continue
                expired += 1
                if not signature.sandbox:
                    for window in windows_at(signature.created_at):
                        policy_repo.release(conn, signature.account_id, window, signature.amount)
                    released += signature.amount
        if len(due) < batch:
            break
    return _report(settled, expired, released, interrupted=False)


def _report(settled: int, expired: int, released: int, *, interrupted: bool) -> ReconcileReport:
    report = ReconcileReport(settled, expired, released, interrupted)
    log.info("reconciled", **report.as_dict())
    if not interrupted:
        reconcile_succeeded()
    return report
