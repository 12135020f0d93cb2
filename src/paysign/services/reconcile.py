"""The payment lifecycle read from the chain, and accurate spend: a signature is awaiting
settlement until the chain says it was used or it is past its ``validBefore``, then settled or
expired unused, each once.

A signature the USDC contract says was used is marked settled with the transaction that used
it (from the contract's ``AuthorizationUsed`` event; none for a cancelled one) — as soon as a
pass sees it, while still valid too (the most recent ones, a bounded number per pass). A
signature past its ``validBefore`` can never settle: if its nonce was never used, it is marked
expired and the amount goes back to every window it was counted in (the day's and month's, the
hour's under an hourly cap, an allow rule's budget windows: see ``store.spend_release``). The
sandbox chain is reconciled like any other; its spend was never counted, so none is released.
Networks without an RPC endpoint are skipped, so their
signed spend stays counted: failing toward under-spending, never over. Live payments are on
Base (``eip155:8453``): without ``PAYSIGN_MAINNET_RPC_URL`` their spend is never released.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from paysign.chain.authorizations import AuthorizationStates, ChainUnavailable
from paysign.clock import Clock
from paysign.metrics import reconcile_succeeded
from paysign.protocol.networks import parse_address
from paysign.store import settlement_repo
from paysign.store.database import Database
from paysign.store.settlement_repo import DueSignature
from paysign.store.spend_release import ExpiredSpend, release_expired

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
    still_valid: int = 100,
) -> ReconcileReport:
    """One pass over every signature past ``validBefore + grace`` still ``signed``, and over
    the ``still_valid`` most recent ones not yet that old, on each network the chain reader can
    ask (Base and Base Sepolia when both have an endpoint). A network whose chain stops
    answering is left for the next pass; the others go on."""
    cutoff = clock.now() - grace_seconds
    settled = expired = released = 0
    interrupted = False
    for network in sorted(chain.networks):
        counts = _reconcile_network(db, chain, network, cutoff, batch)
        if not counts.interrupted:
            early = _settle_still_valid(db, chain, network, cutoff, still_valid)
            counts = ReconcileReport(
                counts.settled + early.settled,
                counts.expired,
                counts.released,
                early.interrupted,
            )
        settled, expired, released = (
            settled + counts.settled,
            expired + counts.expired,
            released + counts.released,
        )
        interrupted = interrupted or counts.interrupted
    return _report(settled, expired, released, interrupted=interrupted)


def _reconcile_network(
    db: Database, chain: AuthorizationStates, network: str, cutoff: int, batch: int
) -> ReconcileReport:
    settled = expired = released = 0
    last_id = 0
    while True:
        with db.read() as conn:
            due = settlement_repo.signatures_due(
                conn, networks=[network], expired_before=cutoff, after_id=last_id, limit=batch
            )
        for signature in due:
            last_id = signature.id
            try:
                used, transaction = _fate_on_chain(chain, signature)
            except ChainUnavailable as exc:
                log.warning("reconcile_interrupted", network=network, error=str(exc))
                return ReconcileReport(settled, expired, released, interrupted=True)
            with db.write() as conn:
                if used:
                    settled += settlement_repo.mark_settled(conn, signature.id, transaction)
                    continue
                if not settlement_repo.mark_expired(conn, signature.id):
                    continue  # another reconciler got there first
                expired += 1
                if not signature.sandbox:
                    spend = ExpiredSpend(
                        signature.id,
                        signature.account_id,
                        signature.amount,
                        signature.created_at,
                        signature.reserved_in,
                    )
                    release_expired(conn, spend)
                    released += signature.amount
        if len(due) < batch:
            return ReconcileReport(settled, expired, released, interrupted=False)


def _settle_still_valid(
    db: Database, chain: AuthorizationStates, network: str, cutoff: int, limit: int
) -> ReconcileReport:
    """A payment usually settles seconds after it is signed: the most recent signatures not
    yet past ``validBefore + grace`` that the chain says were used are marked settled now,
    not when they would have expired. Unused ones are left awaiting: they may still settle.
    Bounded by ``limit``, newest first, so a pass costs at most that many calls more."""
    if limit <= 0:
        return ReconcileReport()
    with db.read() as conn:
        recent = settlement_repo.signatures_still_valid(
            conn, networks=[network], valid_from=cutoff, limit=limit
        )
    settled = 0
    for signature in recent:
        try:
            used, transaction = _fate_on_chain(chain, signature)
        except ChainUnavailable as exc:
            log.warning("reconcile_interrupted", network=network, error=str(exc))
            return ReconcileReport(settled, interrupted=True)
        if used:
            with db.write() as conn:
                settled += settlement_repo.mark_settled(conn, signature.id, transaction)
    return ReconcileReport(settled)


def _fate_on_chain(chain: AuthorizationStates, signature: DueSignature) -> tuple[bool, str | None]:
    """Whether the signature's authorization was used, and by which transaction if so."""
    token = parse_address(signature.asset)
    authorizer = parse_address(signature.wallet_address)
    if not chain.is_used(signature.network, token, authorizer, signature.nonce):
        return False, None
    transaction = chain.settlement_tx(
        signature.network,
        token,
        authorizer,
        signature.nonce,
        signed_at=signature.created_at,
        valid_before=signature.valid_before,
    )
    return True, transaction


def _report(settled: int, expired: int, released: int, *, interrupted: bool) -> ReconcileReport:
    report = ReconcileReport(settled, expired, released, interrupted)
    log.info("reconciled", **report.as_dict())
    if not interrupted:
        reconcile_succeeded()
    return report
