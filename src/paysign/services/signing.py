"""Signing a payment: terms in, a policy-checked, cap-reserved, recorded EIP-3009 authorization out.

Read it top to bottom; each step is one function, in the order a request meets them:

1. ``signing_request``: the body is validated (once per distinct body) and bound to the
   seller it names; nothing is decided yet, and an invalid body is only answered once the
   caller is authenticated.
2. ``decide_and_record``, inside a store transaction: the holder of the credential, the
   checks no allow rule lifts (payee rules, a frozen account, a listed seller held to its
   listing's price and payee), the seller's tier, the source policy (deny → ecosystem → allow
   list / pending), the per-payment cap, then the day and month windows (and the hour's, under
   an hourly cap) reserved with a guarded upsert and the payment recorded with its digest
   (``protocol.prepare_payment``). A refusal is recorded too and returned, never raised.
3. The transaction commits.
4. ``signed_payment``: the signature over the digest, and the header for the seller. A
   signature is only ever made into an answer after the row recording it (and its cap
   reservation) is committed.

Two paths run those steps. ``sign_payment_for`` is the plain one and the reference: one request,
one transaction, signed on the spot. ``SigningQueue`` is the API's under load: the requests
that arrive together share one transaction (``store.group_commit``) and, given the signer
process as ``completion``, their signatures are made on the other core while the batch commits
(``custody.signer_process``). The outcomes are the same; ``tests/services`` checks one path
against the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from paysign.errors import NotAuthenticated, PaymentRefused, PaysignError
from paysign.metrics import signature_made
from paysign.policy.caps import hour_window, windows_at
from paysign.policy.decide import Decision, Outcome
from paysign.policy.listed_terms import listing_breach
from paysign.policy.rules import candidate_hosts
from paysign.policy.seller import SellerLocation
from paysign.protocol import PaymentTerms, PreparedPayment, SignedPayment, prepare_payment
from paysign.services.keys import LAST_USED_RESOLUTION_SECONDS, looks_like_api_key
from paysign.services.payers import HolderLoader, authenticate, by_account, by_api_key
from paysign.services.refusals import (
    cap_refusal,
    frozen_refusal,
    listing_refusal,
    payee_refusal,
    policy_refusal,
    queue_pending,
)
from paysign.services.signing_body import checked_body
from paysign.services.signing_context import SigningContext, SigningDeps, time_ordered_nonce
from paysign.services.signing_records import refusal_record, signature_record
from paysign.store import repositories as repo
from paysign.store.group_commit import Completion, GroupCommitter
from paysign.store.signing_batch import FirstRead, PayerWindows, ReadAhead
from paysign.store.signing_store import SigningTransaction

# --- 1. the request, checked before any transaction ---


@dataclass(frozen=True, slots=True)
class SigningRequest:
    """A request to sign, its body checked: the seller's terms and where the seller is, or why
    they are invalid (answered only once ``load_holder`` finds the caller)."""

    load_holder: HolderLoader
    checked: tuple[PaymentTerms, SellerLocation] | PaysignError
    sandbox: bool
    now: int


def signing_request(
    deps: SigningDeps, load_holder: HolderLoader, body: object, *, sandbox: bool
) -> SigningRequest:
    """``body`` is the request's decoded JSON, or its raw bytes (the API's: decoded and
    validated once per distinct body, ``RequestBodies``)."""
    try:
        checked: tuple[PaymentTerms, SellerLocation] | PaysignError
        checked = checked_body(deps, body, sandbox)
    except PaysignError as exc:
        checked = exc.with_traceback(None)  # kept, not raised: see _answered
    return SigningRequest(load_holder, checked, sandbox, deps.clock.now())


# --- 2. inside the transaction ---

#: What a signing request comes to once its transaction is committed: the recorded payment,
#: ready to sign, or the error to answer with (a refusal is recorded in that transaction).
SigningOutcome = PreparedPayment | PaysignError


def decide_and_record(request: SigningRequest, context: SigningContext) -> SigningOutcome:
    """Every expected outcome is returned, never raised, so that the request can share its
    transaction with others (``store.group_commit``); it raises only on a fault, and may then
    run again in a fresh transaction."""
    tx, checked = context.tx, request.checked
    holder = request.load_holder(tx, request.now, _read_ahead(request))
    if holder is None:
        return NotAuthenticated("Unauthorized")
    if isinstance(checked, PaysignError):
        return checked
    terms, seller = checked
    outcome: PreparedPayment | Refused | None = _refused_before_policy(
        context, holder, seller, terms
    )
    if outcome is None:
        outcome = _decided(request, context, holder, terms, seller)
    if isinstance(outcome, PreparedPayment):
        return outcome
    refusal, rule = outcome
    tx.record_refusal(
        refusal_record(holder, seller, request.sandbox, request.now, terms, refusal, rule)
    )
    return refusal


#: A refusal and the rule, switch or listing that made it (as the refusals record names it).
Refused = tuple[PaymentRefused, str | None]


def _refused_before_policy(
    context: SigningContext,
    holder: repo.KeyHolder,
    seller: SellerLocation,
    terms: PaymentTerms,
) -> Refused | None:
    """The checks no allow rule overrides, in memory (the policy came with the holder): a
    denied payee, a frozen account, then a listed seller held to its listing's price and
    payee."""
    refused_by = holder.policy.payees.refusal(terms.pay_to)
    if refused_by is not None:
        return payee_refusal(refused_by, seller, terms), f"payTo.{refused_by}"
    if holder.policy.frozen:
        return frozen_refusal(seller), "frozen"
    listed = context.deps.listings.listed_terms(seller)
    if listed is not None:
        breach = listing_breach(listed, terms.amount, terms.network.caip2, terms.pay_to)
        if breach is not None:
            return listing_refusal(breach, seller, terms), f"listing:{breach.listing}"
    return None


def _decided(
    request: SigningRequest,
    context: SigningContext,
    holder: repo.KeyHolder,
    terms: PaymentTerms,
    seller: SellerLocation,
) -> PreparedPayment | Refused:
    """The source policy's decision, then the caps: the payment recorded, or why not."""
    tx, now = context.tx, request.now
    decision = context.decision(holder, seller)
    if decision.outcome is Outcome.PENDING:
        return queue_pending(tx, decision, holder.account_id, seller, terms, now), decision.rule
    if not decision.allowed:
        return policy_refusal(decision, seller), decision.rule
    refusal, rule = _within_caps(tx, holder, request, terms, decision)
    if refusal is not None:
        return refusal, rule
    signer = context.signer(holder)
    prepared = prepare_payment(terms, signer, now=now, nonce=context.deps.new_nonce())
    tx.insert_signature(signature_record(holder, seller, request.sandbox, now, prepared, decision))
    _touch_key(tx, holder, now)
    return prepared


def _read_ahead(request: SigningRequest) -> ReadAhead:
    """What the request reads after its holder: the rules on the seller's hosts and, for a live
    payment, the spend windows it reserves in."""
    if isinstance(request.checked, PaysignError):
        return ReadAhead()
    windows = None if request.sandbox else windows_at(request.now)
    return ReadAhead(candidate_hosts(request.checked[1]), windows)


def _within_caps(
    tx: SigningTransaction,
    holder: repo.KeyHolder,
    request: SigningRequest,
    terms: PaymentTerms,
    decision: Decision,
) -> tuple[PaymentRefused | None, str | None]:
    """Reserve the payment in the day and month windows (and the hour's, under an hourly
    cap, and those of the budgets of the allow rules that match), or say which cap refused it
    (and reserve nothing). Sandbox payments spend test funds: no cap applies."""
    if request.sandbox:
        return None, None
    caps = holder.policy.caps
    if caps.per_payment is not None and terms.amount > caps.per_payment:
        limit = caps.per_payment
        return cap_refusal("perPayment", limit, limit, terms.amount, None), "caps.perPayment"
    hour = None if caps.hourly is None else hour_window(request.now)
    day, month = windows_at(request.now)
    hit = tx.reserve(holder.account_id, terms.amount, day, month, caps, hour, decision.budgets)
    if hit is None:
        return None, None
    remaining = max(hit.limit - hit.spent, 0)
    window = hit.window
    if hit.rule is not None:
        rule = str(hit.rule)
        refusal = cap_refusal(
            f"seller.{window.name}", hit.limit, remaining, terms.amount, window.resets_at, rule
        )
        return refusal, f"allow:{rule}:{window.name}"
    refusal = cap_refusal(window.name, hit.limit, remaining, terms.amount, window.resets_at)
    return refusal, f"caps.{window.name}"


def _touch_key(tx: SigningTransaction, holder: repo.KeyHolder, now: int) -> None:
    """Mark the API key used, at most once per ``LAST_USED_RESOLUTION_SECONDS``."""
    last_used = holder.last_used_at
    if holder.key_id is not None and (
        last_used is None or now - last_used >= LAST_USED_RESOLUTION_SECONDS
    ):
        tx.touch_key(holder.key_id, now)


# --- 4. after the commit ---


def signed_payment(outcome: SigningOutcome) -> SignedPayment:
    """The signed payment, or raises the outcome's error; call it only once the outcome's
    transaction is committed. The signature is made here unless the signer process made it."""
    if isinstance(outcome, PaysignError):
        raise outcome
    return outcome.signed()


def _answered(outcome: SigningOutcome, *, sandbox: bool) -> SignedPayment:
    """``signed_payment``, counted in the metrics once it is signed.

    Its callers raise a refusal again without a traceback. A refusal is an answer, kept as its
    request's outcome, so the frames of that traceback hold it: a reference cycle per refused
    request, left to the garbage collector, whose pauses under load reach the p99. Nothing logs
    that traceback."""
    signed = signed_payment(outcome)
    assert isinstance(outcome, PreparedPayment)  # an error outcome was raised above
    signature_made(outcome.terms.network.caip2, sandbox)
    return signed


# --- the two paths ---


def sign_payment(
    deps: SigningDeps, api_key: str | None, body: object, *, sandbox: bool
) -> SignedPayment:
    """Raises ``NotAuthenticated`` before anything else, then the first refusal that applies."""
    if api_key is None or not looks_like_api_key(api_key):
        raise NotAuthenticated("Unauthorized")
    return sign_payment_for(deps, by_api_key(api_key), body, sandbox=sandbox)


def sign_payment_for(
    deps: SigningDeps, load_holder: HolderLoader, body: object, *, sandbox: bool
) -> SignedPayment:
    """The plain path: one request, one transaction, signed here once it is committed.

    ``NotAuthenticated`` when ``load_holder`` finds nobody, then the first refusal that applies.
    """
    try:
        return _answered(_decided_alone(deps, load_holder, body, sandbox), sandbox=sandbox)
    except PaysignError as refusal:
        raise refusal.with_traceback(None) from None


def _decided_alone(
    deps: SigningDeps, load_holder: HolderLoader, body: object, sandbox: bool
) -> SigningOutcome:
    request = signing_request(deps, load_holder, body, sandbox=sandbox)
    with deps.store.transaction() as tx:
        return decide_and_record(request, SigningContext(deps, tx))


class SigningWork:
    """A request's part inside a shared transaction."""

    __slots__ = ("request",)

    def __init__(self, request: SigningRequest) -> None:
        self.request = request

    def __call__(self, context: SigningContext) -> SigningOutcome:
        return decide_and_record(self.request, context)


def signing_work(
    deps: SigningDeps, load_holder: HolderLoader, body: object, *, sandbox: bool
) -> SigningWork:
    return SigningWork(signing_request(deps, load_holder, body, sandbox=sandbox))


def _lock_order(work: Callable[[SigningContext], SigningOutcome]) -> bytes:
    return work.request.load_holder.lock_order if isinstance(work, SigningWork) else b""


def _first_read(work: Callable[[SigningContext], SigningOutcome]) -> FirstRead | None:
    if not isinstance(work, SigningWork):
        return None
    request = work.request
    return request.load_holder.first_read(request.now, _read_ahead(request))


def _payer_windows(work: Callable[[SigningContext], SigningOutcome]) -> PayerWindows | None:
    if not isinstance(work, SigningWork):
        return None
    request = work.request
    windows = _read_ahead(request).windows
    return None if windows is None else request.load_holder.payer_windows(request.now, windows)


def signing_committer(
    deps: SigningDeps, completion: Completion | None = None
) -> GroupCommitter[SigningContext, SigningOutcome]:
    """Group commit over ``deps.store``, each transaction with its ``SigningContext``; a
    batch's requests run in their payers' order (``HolderLoader.lock_order``), their first
    reads made before it runs where the store can (``HolderLoader.first_read``), their
    windows locked first where it has other writers (``HolderLoader.payer_windows``)."""
    return GroupCommitter(
        deps.store,
        partial(SigningContext, deps),
        completion=completion,
        lock_order=_lock_order,
        first_read=_first_read,
        payer_windows=_payer_windows,
    )


class SigningQueue:
    """The batched path: the requests that arrive together share one transaction, and with
    the signer process as ``completion`` their signatures are made beside the event loop."""

    def __init__(self, deps: SigningDeps, completion: Completion | None = None) -> None:
        self.deps = deps
        self.committer = signing_committer(deps, completion)

    async def sign(
        self, load_holder: HolderLoader, body: object, *, sandbox: bool
    ) -> SignedPayment:
        """As ``sign_payment_for``, answered once the batch it joined is committed."""
        work = signing_work(self.deps, load_holder, body, sandbox=sandbox)
        try:
            return _answered(await self.committer.run(work), sandbox=sandbox)
        except PaysignError as refusal:
            del work  # it holds the request, which may hold the refusal
            raise refusal.with_traceback(None) from None


__all__ = [
    "Completion",
    "HolderLoader",
    "PaymentRefused",
    "SigningDeps",
    "SigningOutcome",
    "SigningQueue",
    "SigningRequest",
    "SigningWork",
    "authenticate",
    "by_account",
    "by_api_key",
    "decide_and_record",
    "sign_payment",
    "sign_payment_for",
    "signed_payment",
    "signing_committer",
    "signing_request",
    "signing_work",
    "time_ordered_nonce",
]
