"""A withdrawal's fate read from the chain, for those whose submitting request never learned it
(the process died before the chain answered, or the chain answered "pending").

Each withdrawal still ``submitting`` or ``pending`` and recorded more than ``grace_seconds`` ago
is asked about on its network: the USDC contract says whether its authorization's nonce was
used. Used: it is ``sent``, with the transaction of the ``AuthorizationUsed`` event (or the
one it was submitted in, when no event is found). Unused and past ``validBefore + grace``: it is
``failed``, since the contract refuses the authorization from then on, so it can never move
money. Otherwise it is left for the next pass: it may still be mined.

Each network is asked on its own: one whose chain stops answering is left for the next pass
and the others go on.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from paysign.chain.authorizations import AuthorizationStates, ChainUnavailable
from paysign.clock import Clock
from paysign.protocol.networks import AssetRegistry, parse_address, resolve_network
from paysign.services.withdrawals import VALID_SECONDS
from paysign.store import withdrawal_repo
from paysign.store.database import Database
from paysign.store.withdrawal_repo import UnsettledWithdrawal

log = structlog.get_logger("paysign.withdrawals")

#: A withdrawal recorded before its ``validBefore`` was kept: its authorization was valid for
#: ``VALID_SECONDS`` of chain time from its signing; a day more covers any gap between the
#: chain's clock and ours.
UNKNOWN_VALIDITY_SECONDS = VALID_SECONDS + 86_400


@dataclass(frozen=True, slots=True)
class WithdrawalReconcileReport:
    sent: int = 0
    failed: int = 0
    interrupted: bool = False  # a chain stopped answering; its rest waits for the next pass

    def as_dict(self) -> dict[str, int | bool]:
        return {"sent": self.sent, "failed": self.failed, "interrupted": self.interrupted}


def reconcile_withdrawals(
    db: Database,
    clock: Clock,
    chain: AuthorizationStates,
    registry: AssetRegistry,
    *,
    grace_seconds: int = 120,
    batch: int = 200,
) -> WithdrawalReconcileReport:
    """One pass over the unsettled withdrawals of every network the chain reader can ask (and
    the asset registry knows the USDC contract of).

    >>> WithdrawalReconcileReport(sent=1).as_dict()
    {'sent': 1, 'failed': 0, 'interrupted': False}
    """
    sent = failed = 0
    interrupted = False
    for network in sorted(chain.networks):
        known = resolve_network(network)
        token = registry.usdc_for(known) if known is not None else None
        if token is None:
            continue
        counts = _reconcile_network(
            db, clock, chain, network, token.address, grace_seconds=grace_seconds, batch=batch
        )
        sent, failed = sent + counts.sent, failed + counts.failed
        interrupted = interrupted or counts.interrupted
    report = WithdrawalReconcileReport(sent, failed, interrupted)
    log.info("withdrawals_reconciled", **report.as_dict())
    return report


def _reconcile_network(
    db: Database,
    clock: Clock,
    chain: AuthorizationStates,
    network: str,
    token: bytes,
    *,
    grace_seconds: int,
    batch: int,
) -> WithdrawalReconcileReport:
    sent = failed = 0
    last_id = 0
    while True:
        now = clock.now()
        with db.read() as conn:
            due = withdrawal_repo.unsettled(
                conn,
                network=network,
                created_before=now - grace_seconds,
                after_id=last_id,
                limit=batch,
            )
        for withdrawal in due:
            last_id = withdrawal.id
            valid_before = _valid_before(withdrawal)
            try:
                used, transaction = _fate_on_chain(chain, network, token, withdrawal, valid_before)
            except ChainUnavailable as exc:
                log.warning("withdrawal_reconcile_interrupted", network=network, error=str(exc))
                return WithdrawalReconcileReport(sent, failed, interrupted=True)
            if used:
                with db.write() as conn:
                    sent += withdrawal_repo.settle(conn, withdrawal.id, "sent", transaction)
                log.info("withdrawal_confirmed", withdrawal=withdrawal.id, transaction=transaction)
            elif clock.now() > valid_before + grace_seconds:
                with db.write() as conn:
                    failed += withdrawal_repo.settle(conn, withdrawal.id, "failed", None)
                log.info("withdrawal_expired_unused", withdrawal=withdrawal.id)
        if len(due) < batch:
            return WithdrawalReconcileReport(sent, failed)


def _valid_before(withdrawal: UnsettledWithdrawal) -> int:
    if withdrawal.valid_before is not None:
        return withdrawal.valid_before
    return withdrawal.created_at + UNKNOWN_VALIDITY_SECONDS


def _fate_on_chain(
    chain: AuthorizationStates,
    network: str,
    token: bytes,
    withdrawal: UnsettledWithdrawal,
    valid_before: int,
) -> tuple[bool, str | None]:
    """Whether the authorization was used, and by which transaction if so."""
    authorizer = parse_address(withdrawal.from_address)
    if not chain.is_used(network, token, authorizer, withdrawal.nonce):
        return False, None
    transaction = chain.settlement_tx(
        network,
        token,
        authorizer,
        withdrawal.nonce,
        signed_at=withdrawal.created_at,
        valid_before=valid_before,
    )
    return True, transaction or withdrawal.transaction_hash
