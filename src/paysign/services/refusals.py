"""Turning a policy decision or a full spend window into the refusal the caller receives."""

from __future__ import annotations

from paysign.errors import (
    AllowPending,
    EcosystemDisabled,
    PaymentRefused,
    PendingApprovalsFull,
    SellerDenied,
    SpendCapExceeded,
)
from paysign.policy.caps import iso
from paysign.policy.decide import MAX_PENDING_SELLERS, Decision, Outcome
from paysign.policy.seller import SellerLocation
from paysign.protocol import PaymentTerms
from paysign.protocol.usdc import format_usdc
from paysign.store.pending_queue import PendingEntry
from paysign.store.signing_store import SigningTransaction


def usdc(amount: int) -> str:
    return f"{format_usdc(amount)} USDC"


def policy_refusal(decision: Decision, seller: SellerLocation) -> PaymentRefused:
    where = {"seller": str(seller), "sellerHost": seller.host, "sellerPath": seller.path}
    if decision.outcome is Outcome.DENIED:
        return SellerDenied(
            f"Payments to {seller} are refused: it matches the deny rule {decision.rule}. "
            "Only the account holder can change the deny list, in the portal.",
            rule=decision.rule,
            **where,
        )
    if decision.outcome is Outcome.ECOSYSTEM_DISABLED:
        return EcosystemDisabled(
            f"Payments to {seller} are refused: it is a {decision.tier.value} seller and "
            f"payments to that ecosystem are switched off ({decision.rule}).",
            rule=decision.rule,
            tier=decision.tier.value,
            **where,
        )
    assert decision.outcome is Outcome.PENDING
    return AllowPending(
        f"The seller {seller.host} (path {seller.path}) is waiting for the account holder's "
        "approval. Ask them to approve it in the portal; until then every payment to it is "
        "refused, so retrying now will not help.",
        **where,
    )


def queue_pending(
    tx: SigningTransaction,
    decision: Decision,
    account_id: str,
    seller: SellerLocation,
    terms: PaymentTerms,
    now: int,
) -> PaymentRefused:
    """A seller waiting for approval: ``allow-pending`` once it is in the account's queue
    (its latest terms kept for the holder to see), or ``pending-approvals-full`` when it is new
    and the queue holds ``MAX_PENDING_SELLERS`` already (nothing is queued)."""
    pay_to = "0x" + terms.pay_to.hex()
    entry = PendingEntry(account_id, seller, pay_to, terms.amount, terms.network.caip2, now)
    if tx.admit_pending(entry, MAX_PENDING_SELLERS):
        return policy_refusal(decision, seller)
    return PendingApprovalsFull(
        f"The seller {seller.host} (path {seller.path}) needs the account holder's approval, "
        f"but {MAX_PENDING_SELLERS} sellers are already waiting for it, the most an account "
        "keeps; this one was not added and nothing was signed. Stop trying new sellers: the "
        "account holder must first approve or deny the waiting ones in the portal, or add "
        "allow rules for the sellers they trust.",
        limit=MAX_PENDING_SELLERS,
        seller=str(seller),
        sellerHost=seller.host,
        sellerPath=seller.path,
    )


def cap_refusal(
    cap: str, limit: int, remaining: int, amount: int, resets_at: int | None
) -> SpendCapExceeded:
    when = f" It resets at {iso(resets_at)}." if resets_at is not None else ""
    return SpendCapExceeded(
        f"This payment of {usdc(amount)} would pass the {cap} cap of {usdc(limit)}; "
        f"{usdc(remaining)} remains.{when}",
        cap=cap,
        limit=limit,
        remaining=remaining,
        amount=amount,
        resetsAt=None if resets_at is None else iso(resets_at),
    )
