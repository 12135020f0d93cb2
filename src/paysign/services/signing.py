"""``sign_payment``: terms in, a policy-checked, cap-reserved, recorded EIP-3009 authorization out.

The order is fixed: authenticate → validate the terms (and that they are for the declared
seller's host) → source policy (deny → ecosystem → allow list / pending) → per-payment cap →
in one transaction reserve the day and month windows with a guarded upsert and record the
payment → commit → sign → return. The digest is made in
the transaction, the signature over it after (or meanwhile, in the signer process): either
way a signature is only ever returned after the row recording it (and its cap reservation)
is committed.
Every refusal by the policy or a cap is recorded too, in its own committed transaction.

Authentication comes first: an unauthenticated caller learns nothing from a validation error.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from paysign.catalog.tiers import NoListings, TierLookup
from paysign.clock import Clock
from paysign.custody import KeyVault, SealedSecret
from paysign.errors import (
    InvalidPaymentTerms,
    NotAuthenticated,
    PaymentRefused,
    PaysignError,
    SandboxNetworkMismatch,
    SellerResourceMismatch,
)
from paysign.policy.binding import unbound_resource
from paysign.policy.caps import windows_at
from paysign.policy.decide import Decision, Outcome, Tier, decide
from paysign.policy.rules import candidate_hosts
from paysign.policy.seller import SellerLocation, seller_location
from paysign.protocol import (
    AssetRegistry,
    PreparedPayment,
    SignatureRequest,
    SignedPayment,
    WalletSigner,
    parse_address,
    parse_signature_request,
    prepare_payment,
)
from paysign.protocol.terms import resource_urls
from paysign.services.accounts import wallet_context
from paysign.services.keys import LAST_USED_RESOLUTION_SECONDS, hash_api_key, looks_like_api_key
from paysign.services.refusals import cap_refusal, policy_refusal, queue_pending
from paysign.services.request_bodies import RequestBodies
from paysign.store import policy_repo
from paysign.store import repositories as repo
from paysign.store.signing_store import SigningStore, SigningTransaction


def time_ordered_nonce() -> bytes:
    """32 bytes: a millisecond timestamp (6 bytes) then 26 random bytes (208 bits).

    USDC only needs each nonce unique per payer; 208 random bits keep collisions out of reach,
    and the time prefix makes the ledger's unique nonce index grow at its right edge instead of
    dirtying a random page on every insert (a ledger of millions of rows stays cheap to write).
    """
    return (time.time_ns() // 1_000_000).to_bytes(6, "big") + secrets.token_bytes(26)


@dataclass(frozen=True, slots=True)
class SigningDeps:
    store: SigningStore
    vault: KeyVault
    clock: Clock
    registry: AssetRegistry
    tiers: TierLookup = field(default_factory=NoListings)
    new_nonce: Callable[[], bytes] = field(default=lambda: time_ordered_nonce())
    #: Raw bodies validated lately (``signing_work`` given ``bytes``).
    bodies: RequestBodies = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bodies", RequestBodies(self.registry))


@dataclass(slots=True)
class Attempt:
    holder: repo.KeyHolder
    request: SignatureRequest
    seller: SellerLocation
    sandbox: bool
    now: int
    prepared: PreparedPayment | None = None

    def refusal_record(self, error: PaysignError, rule: str | None) -> policy_repo.RefusalRecord:
        terms = self.request.terms
        return policy_repo.RefusalRecord(
            account_id=self.holder.account_id,
            api_key_id=self.holder.key_id,
            seller_host=self.seller.host,
            seller_path=self.seller.path,
            network=terms.network.caip2,
            amount=terms.amount,
            sandbox=self.sandbox,
            reason=error.slug,
            rule=rule,
            detail=error.detail,
            created_at=self.now,
        )


def _validated(
    deps: SigningDeps, body: object, sandbox: bool
) -> tuple[SignatureRequest, SellerLocation]:
    if isinstance(body, bytes):
        request = deps.bodies.validated(body)
    else:
        request = parse_signature_request(body, deps.registry)
    if sandbox and not request.terms.network.testnet:
        raise SandboxNetworkMismatch(
            f"X-Sandbox-Mode: true was sent for a payment on {request.terms.network_name}; "
            "sandbox payments must be on the testnet (eip155:84532). "
            "Omit the header to make a live payment.",
        )
    try:
        seller = seller_location(request.seller_url)
    except ValueError as exc:
        raise InvalidPaymentTerms("/sellerUrl", str(exc)) from None
    unbound = unbound_resource(request.seller_url, resource_urls(request.terms))
    if unbound is not None:
        if unbound.resource_host is None:
            raise InvalidPaymentTerms(unbound.pointer, unbound.reason)
        raise SellerResourceMismatch(
            unbound.pointer, unbound.reason, unbound.seller_host, unbound.resource_host
        )
    return request, seller


def authenticate(deps: SigningDeps, api_key: str | None) -> repo.KeyHolder:
    """The key's holder; ``NotAuthenticated`` for a missing, malformed, unknown, expired or
    revoked key alike."""
    if api_key is None or not looks_like_api_key(api_key):
        raise NotAuthenticated("Unauthorized")
    with deps.store.transaction() as tx:
        holder = tx.key_holder(hash_api_key(api_key), deps.clock.now())
    if holder is None:
        raise NotAuthenticated("Unauthorized")
    return holder


#: Finds who pays, inside the signing transaction: by API key, or by account (OAuth).
HolderLoader = Callable[[SigningTransaction, int], repo.KeyHolder | None]


def by_api_key(api_key: str) -> HolderLoader:
    key_hash = hash_api_key(api_key)
    return lambda tx, now: tx.key_holder(key_hash, now)


def by_account(account_id: str) -> HolderLoader:
    """For a credential already checked elsewhere (an OAuth access token)."""
    return lambda tx, now: tx.account_holder(account_id)


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
    """Sign for the holder ``load_holder`` finds (``NotAuthenticated`` when none).

    Everything — the holder lookup, the rules, the refusal or the reservation and the record —
    happens in one transaction: one lock cycle, one commit, and a consistent view.
    """
    work = signing_work(deps, load_holder, body, sandbox=sandbox)
    with deps.store.transaction() as tx:
        outcome = work(tx)
    return signed_payment(outcome)


#: What a signing request comes to once its transaction is committed: the recorded payment,
#: ready to sign, or the error to answer with (a refusal is recorded in that transaction).
SigningOutcome = PreparedPayment | PaysignError


def signed_payment(outcome: SigningOutcome) -> SignedPayment:
    """The signed payment (signed here unless the signer process did), or raises the
    outcome's error; call it only once the outcome's transaction is committed."""
    if isinstance(outcome, PaysignError):
        raise outcome
    return outcome.signed()


def signing_work(
    deps: SigningDeps, load_holder: HolderLoader, body: object, *, sandbox: bool
) -> Callable[[SigningTransaction], SigningOutcome]:
    """The part of a signing request that runs inside a store transaction.

    ``body`` is the request's decoded JSON, or its raw bytes (the API's: decoded and validated
    once per distinct body, ``RequestBodies``); either way an invalid body is answered only
    once the caller is authenticated.

    It returns every expected outcome instead of raising, so that it can share a transaction
    with other requests (``store.group_commit``); it only raises on a fault, and may then be run
    again in a fresh transaction.
    """
    try:
        request, seller = _validated(deps, body, sandbox)
        invalid: PaysignError | None = None
    except PaysignError as exc:
        invalid = exc
    now = deps.clock.now()

    def work(tx: SigningTransaction) -> SigningOutcome:
        holder = load_holder(tx, now)
        if holder is None:
            return NotAuthenticated("Unauthorized")
        if invalid is not None:
            return invalid
        # The catalog snapshot may refresh itself with a query: through the reader, never
        # through the signing store's connection, so it cannot wait on what this one holds.
        tier = deps.tiers.tier_of(seller)
        attempt = Attempt(holder, request, seller, sandbox, now)
        decision = _decision(tx, holder, seller, tier)
        if decision.allowed:
            refusal, rule = _sign_within_caps(deps, tx, attempt, decision)
        elif decision.outcome is Outcome.PENDING:
            refusal = queue_pending(tx, decision, holder.account_id, seller, request.terms, now)
            rule = decision.rule
        else:
            refusal, rule = policy_refusal(decision, seller), decision.rule
        if refusal is not None:
            tx.record_refusal(attempt.refusal_record(refusal, rule))
            return refusal
        assert attempt.prepared is not None  # allowed and within the caps: it was recorded
        return attempt.prepared

    return work


def _decision(
    tx: SigningTransaction, holder: repo.KeyHolder, seller: SellerLocation, tier: Tier
) -> Decision:
    """The policy's decision; the same for every request of the transaction for this account
    and seller: the transaction reads the account's policy and rules once, and nothing a
    signing transaction writes changes them."""
    key = ("decision", holder.account_id, seller, tier)
    found = tx.memo.get(key)
    if isinstance(found, Decision):
        return found
    decision = decide(
        holder.policy, tx.grants(holder.account_id, candidate_hosts(seller)), seller, tier
    )
    tx.memo[key] = decision
    return decision


def _signer(deps: SigningDeps, tx: SigningTransaction, holder: repo.KeyHolder) -> WalletSigner:
    """The wallet's signer, its key opened once per transaction and dropped with it."""
    key = ("signer", holder.wallet_id, holder.sealed_wallet_key)
    found = tx.memo.get(key)
    if found is None:
        sealed = SealedSecret.from_bytes(holder.sealed_wallet_key)
        private_key = deps.vault.open(wallet_context(holder.wallet_id), sealed)
        found = tx.memo[key] = WalletSigner(private_key, parse_address(holder.wallet_address))
    assert isinstance(found, WalletSigner)
    return found


def _sign_within_caps(
    deps: SigningDeps, tx: SigningTransaction, attempt: Attempt, decision: Decision
) -> tuple[PaymentRefused | None, str | None]:
    """Record the payment and make its digest, or say which cap refused it (nothing is then
    reserved)."""
    terms = attempt.request.terms
    caps = attempt.holder.policy.caps
    if not attempt.sandbox:
        if caps.per_payment is not None and terms.amount > caps.per_payment:
            limit = caps.per_payment
            return cap_refusal("perPayment", limit, limit, terms.amount, None), "caps.perPayment"
        hit = tx.reserve(attempt.holder.account_id, terms.amount, *windows_at(attempt.now), caps)
        if hit is not None:
            remaining = max(hit.limit - hit.spent, 0)
            refusal = cap_refusal(
                hit.window.name, hit.limit, remaining, terms.amount, hit.window.resets_at
            )
            return refusal, f"caps.{hit.window.name}"
    holder = attempt.holder
    signer = _signer(deps, tx, holder)
    attempt.prepared = prepare_payment(terms, signer, now=attempt.now, nonce=deps.new_nonce())
    tx.insert_signature(_signature_record(attempt, attempt.prepared, decision))
    last_used = holder.last_used_at
    stale = last_used is None or attempt.now - last_used >= LAST_USED_RESOLUTION_SECONDS
    if holder.key_id is not None and stale:
        tx.touch_key(holder.key_id, attempt.now)
    return None, None


def _signature_record(
    attempt: Attempt, prepared: PreparedPayment, decision: Decision
) -> repo.SignatureRecord:
    terms = attempt.request.terms
    return repo.SignatureRecord(
        account_id=attempt.holder.account_id,
        api_key_id=attempt.holder.key_id,
        seller_host=attempt.seller.host,
        seller_path=attempt.seller.path,
        network=terms.network.caip2,
        asset=terms.token.address_hex,
        pay_to="0x" + terms.pay_to.hex(),
        amount=terms.amount,
        nonce=prepared.nonce,
        valid_before=prepared.valid_before,
        sandbox=attempt.sandbox,
        x402_version=terms.x402_version,
        created_at=attempt.now,
        tier=decision.tier.value,
        rule=decision.rule,
    )


__all__ = [
    "HolderLoader",
    "PaymentRefused",
    "SigningDeps",
    "SigningOutcome",
    "authenticate",
    "by_account",
    "by_api_key",
    "sign_payment",
    "sign_payment_for",
    "signed_payment",
    "signing_work",
]
