"""``sign_payment``: terms in, a recorded EIP-3009 authorization out.

A signature is only ever returned after the row that records it is committed: if the database
refuses (or the process dies), the caller gets an error and the authorization never leaves.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.engine import Connection

from paysign.clock import Clock
from paysign.custody import KeyVault, SealedSecret
from paysign.errors import InvalidPaymentTerms, SandboxNetworkMismatch
from paysign.policy.seller import SellerLocation, seller_location
from paysign.protocol import (
    AssetRegistry,
    PrivateKeySigner,
    SignatureRequest,
    SignedPayment,
    parse_signature_request,
)
from paysign.protocol import (
    sign_payment as sign_terms,
)
from paysign.services.accounts import wallet_context
from paysign.services.keys import LAST_USED_RESOLUTION_SECONDS
from paysign.store import repositories as repo
from paysign.store.database import Database


@dataclass(frozen=True, slots=True)
class PaymentAttempt:
    """Everything the source policy and the caps get to judge, once the terms are valid."""

    holder: repo.KeyHolder
    request: SignatureRequest
    seller: SellerLocation
    sandbox: bool
    now: int


class PaymentGate(Protocol):
    """Admits or refuses an attempt inside the signing transaction (raise to refuse).

    It runs in the same transaction as the signature record, so a guarded update it makes
    (a cap reservation) commits or rolls back together with the signature.
    """

    def admit(self, conn: Connection, attempt: PaymentAttempt) -> None: ...


class AdmitAll:
    def admit(self, conn: Connection, attempt: PaymentAttempt) -> None:
        return None


@dataclass(frozen=True, slots=True)
class SigningDeps:
    db: Database
    vault: KeyVault
    clock: Clock
    registry: AssetRegistry
    gate: PaymentGate = field(default_factory=AdmitAll)
    new_nonce: Callable[[], bytes] = field(default=lambda: secrets.token_bytes(32))


def sign_payment(
    deps: SigningDeps, holder: repo.KeyHolder, body: object, *, sandbox: bool
) -> SignedPayment:
    request = parse_signature_request(body, deps.registry)
    terms = request.terms
    if sandbox and not terms.network.testnet:
        raise SandboxNetworkMismatch(
            f"X-Sandbox-Mode: true was sent for a payment on {terms.network_name}; "
            "sandbox payments must be on the testnet (eip155:84532). "
            "Omit the header to make a live payment.",
        )
    try:
        seller = seller_location(request.seller_url)
    except ValueError as exc:
        raise InvalidPaymentTerms("/sellerUrl", str(exc)) from None

    now = deps.clock.now()
    attempt = PaymentAttempt(holder, request, seller, sandbox, now)
    private_key = deps.vault.open(
        wallet_context(holder.wallet_id), SealedSecret.from_bytes(holder.sealed_wallet_key)
    )
    signed = sign_terms(terms, PrivateKeySigner(private_key), now=now, nonce=deps.new_nonce())

    record = repo.SignatureRecord(
        account_id=holder.account_id,
        api_key_id=holder.key_id,
        seller_host=seller.host,
        seller_path=seller.path,
        network=terms.network.caip2,
        asset=terms.token.address_hex,
        pay_to="0x" + terms.pay_to.hex(),
        amount=terms.amount,
        nonce=signed.nonce,
        valid_before=signed.valid_before,
        sandbox=sandbox,
        x402_version=terms.x402_version,
        created_at=now,
    )
    with deps.db.write() as conn:
        deps.gate.admit(conn, attempt)
        repo.insert_signature(conn, record)
        if holder.last_used_at is None or now - holder.last_used_at >= LAST_USED_RESOLUTION_SECONDS:
            repo.touch_key(conn, holder.key_id, now)
    return signed
