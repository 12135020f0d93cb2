"""Turning a policy decision or a full spend window into the refusal the caller receives."""

from __future__ import annotations

from typing import Literal

from paysign.errors import (
    AllowPending,
    EcosystemDisabled,
    PayeeDenied,
    PayeeMismatch,
    PaymentRefused,
    PendingApprovalsFull,
    PriceAboveListing,
    SellerDenied,
    SpendCapExceeded,
    SpendingFrozen,
)
from paysign.policy.caps import iso
from paysign.policy.decide import MAX_PENDING_SELLERS, Decision, Outcome
from paysign.policy.listed_terms import ListingBreach
from paysign.policy.seller import SellerLocation
from paysign.protocol import PaymentTerms, checksum_address
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
    cap: str,
    limit: int,
    remaining: int,
    amount: int,
    resets_at: int | None,
    rule: str | None = None,
) -> SpendCapExceeded:
    """``rule``: the allow rule whose budget ``cap`` is (``seller.daily``, ``seller.monthly``)."""
    when = f" It resets at {iso(resets_at)}." if resets_at is not None else ""
    what = f"the {cap} cap" if rule is None else f"the {cap} budget of the allow rule {rule}"
    extra = {} if rule is None else {"rule": rule}
    return SpendCapExceeded(
        f"This payment of {usdc(amount)} would pass {what} of {usdc(limit)}; "
        f"{usdc(remaining)} remains.{when}",
        **extra,
        cap=cap,
        limit=limit,
        remaining=remaining,
        amount=amount,
        resetsAt=None if resets_at is None else iso(resets_at),
    )


def payee_refusal(
    refused_by: Literal["allow", "deny"], seller: SellerLocation, terms: PaymentTerms
) -> PayeeDenied:
    pay_to = checksum_address(terms.pay_to)
    why = (
        "it is on the account's payee deny list"
        if refused_by == "deny"
        else "it is not on the account's payee allow list"
    )
    return PayeeDenied(
        f"The payment to {seller} is refused: its terms pay {pay_to}, and {why}. Only the "
        "account holder can change the payee rules, in the portal; retrying will not help.",
        payTo=pay_to,
        rule=f"payTo.{refused_by}",
        seller=str(seller),
        sellerHost=seller.host,
        sellerPath=seller.path,
    )


def frozen_refusal(seller: SellerLocation) -> SpendingFrozen:
    return SpendingFrozen(
        f"The payment to {seller} is refused: the account holder has frozen spending, live "
        "and sandbox. Only they can unfreeze it, in the portal; retrying will not help.",
        seller=str(seller),
        sellerHost=seller.host,
        sellerPath=seller.path,
    )


def listing_refusal(
    breach: ListingBreach, seller: SellerLocation, terms: PaymentTerms
) -> PaymentRefused:
    where = {"listing": breach.listing, "seller": str(seller)}
    if breach.kind == "price-above-listing":
        assert isinstance(breach.expected, int)
        return PriceAboveListing(
            f"The seller {seller} is the catalog listing {breach.listing}, priced at "
            f"{usdc(breach.expected)}, and its terms ask {usdc(terms.amount)}. Nothing was "
            "signed: a listed seller is paid at most its listed price.",
            listedPrice=breach.expected,
            amount=terms.amount,
            **where,
        )
    pay_to = "0x" + terms.pay_to.hex()
    published = (
        f"the catalog publishes {breach.expected} for {terms.network.caip2}"
        if breach.expected is not None
        else f"the catalog publishes no payee on {terms.network.caip2}"
    )
    return PayeeMismatch(
        f"The seller {seller} is the catalog listing {breach.listing}, and its terms pay "
        f"{pay_to}, but {published}. Nothing was signed: the seller's endpoint may be "
        "compromised or spoofed.",
        payTo=pay_to,
        listedPayTo=breach.expected,
        network=terms.network.caip2,
        **where,
    )
