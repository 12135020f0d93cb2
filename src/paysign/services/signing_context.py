"""What the signing path works with: its dependencies, and per transaction a shared context.

Group commit runs the requests of a batch one after the other in one store transaction. What
they work out alike — the policy's decision for an account and a seller, a wallet's opened
key — is worked out once per transaction, here, and dropped with it: a decision never outlives
the policy it was read from, and an opened key never outlives the transaction.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from paysign.catalog.tiers import NoListings, TierLookup
from paysign.clock import Clock
from paysign.custody import KeyVault, SealedSecret
from paysign.policy.decide import Decision, Tier, decide
from paysign.policy.listed_terms import ListedTerms
from paysign.policy.rules import candidate_hosts
from paysign.policy.seller import SellerLocation
from paysign.protocol import AssetRegistry, DigestSigner, WalletSigner, parse_address
from paysign.services.accounts import wallet_context
from paysign.services.request_bodies import RequestBodies
from paysign.store import repositories as repo
from paysign.store.signing_store import SigningStore, SigningTransaction


def time_ordered_nonce() -> bytes:
    """32 bytes: a millisecond timestamp (6 bytes) then 26 random bytes (208 bits).

    USDC only needs each nonce unique per payer; 208 random bits keep collisions out of reach,
    and the time prefix makes the ledger's unique nonce index grow at its right edge instead of
    dirtying a random page on every insert (a ledger of millions of rows stays cheap to write).
    """
    return (time.time_ns() // 1_000_000).to_bytes(6, "big") + secrets.token_bytes(26)


class ListingLookup(Protocol):
    """The catalog as the signing path asks it: what a listed seller publishes (no query)."""

    def listed_terms(self, where: SellerLocation) -> ListedTerms | None: ...


class NoListedTerms:
    def listed_terms(self, where: SellerLocation) -> ListedTerms | None:
        return None


#: Makes the signer of a custodial wallet from its opened key and its address.
WalletSigners = Callable[[bytes, bytes], DigestSigner]


@dataclass(frozen=True, slots=True)
class SigningDeps:
    store: SigningStore
    vault: KeyVault
    clock: Clock
    registry: AssetRegistry
    tiers: TierLookup = field(default_factory=NoListings)
    new_nonce: Callable[[], bytes] = time_ordered_nonce
    #: The signer process's ``wallet_signer`` when there is one (it may sign ahead of time).
    wallet_signer: WalletSigners = WalletSigner
    #: The catalog: a listed seller is held to its listing's price and payee.
    listings: ListingLookup = field(default_factory=NoListedTerms)
    #: Raw bodies validated lately (``signing.signing_request`` given ``bytes``).
    bodies: RequestBodies = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bodies", RequestBodies(self.registry))


class SigningContext:
    """One store transaction, as the signing requests that share it see it."""

    __slots__ = ("_decisions", "_signers", "deps", "tx")

    def __init__(self, deps: SigningDeps, tx: SigningTransaction) -> None:
        self.deps = deps
        self.tx = tx
        self._decisions: dict[tuple[str, SellerLocation, Tier], Decision] = {}
        self._signers: dict[tuple[str, bytes], DigestSigner] = {}

    def decision(self, holder: repo.KeyHolder, seller: SellerLocation) -> Decision:
        """The source policy's decision for paying ``seller``: the same for every request of
        the transaction, which reads the account's policy and rules once (nothing a signing
        transaction writes changes them)."""
        # The catalog snapshot may refresh itself with a query: through the reader, never
        # through the signing store's connection, so it cannot wait on what this one holds.
        tier = self.deps.tiers.tier_of(seller)
        key = (holder.account_id, seller, tier)
        found = self._decisions.get(key)
        if found is None:
            grants = self.tx.grants(holder.account_id, candidate_hosts(seller))
            found = self._decisions[key] = decide(holder.policy, grants, seller, tier)
        return found

    def signer(self, holder: repo.KeyHolder) -> DigestSigner:
        """The wallet's signer, its key opened once per transaction."""
        key = (holder.wallet_id, holder.sealed_wallet_key)
        found = self._signers.get(key)
        if found is None:
            sealed = SealedSecret.from_bytes(holder.sealed_wallet_key)
            private_key = self.deps.vault.open(wallet_context(holder.wallet_id), sealed)
            address = parse_address(holder.wallet_address)
            found = self._signers[key] = self.deps.wallet_signer(private_key, address)
        return found


__all__ = [
    "ListingLookup",
    "NoListedTerms",
    "SigningContext",
    "SigningDeps",
    "WalletSigners",
    "time_ordered_nonce",
]
