"""What the signing path writes: a signature's record and a refusal's, as the ledger keeps them."""

from __future__ import annotations

from paysign.errors import PaymentRefused
from paysign.policy.caps import hour_window
from paysign.policy.decide import Decision
from paysign.policy.seller import SellerLocation
from paysign.protocol import PaymentTerms, PreparedPayment
from paysign.store import policy_repo
from paysign.store import repositories as repo
from paysign.store.reserved_windows import NO_EXTRA_WINDOWS, encode


def signature_record(
    holder: repo.KeyHolder,
    seller: SellerLocation,
    sandbox: bool,
    now: int,
    prepared: PreparedPayment,
    decision: Decision,
) -> repo.SignatureRecord:
    terms = prepared.terms
    reserved_in = NO_EXTRA_WINDOWS
    hourly = holder.policy.caps.hourly is not None
    if not sandbox and (hourly or decision.budgets):
        # What ``_within_caps`` reserved in: the hour's window under an hourly cap, and the
        # windows of every budget of the decision's matching allow rules.
        hour_start = hour_window(now).start if hourly else None
        reserved_in = encode(hour_start, (rule for rule, _ in decision.budgets))
    return repo.SignatureRecord(
        account_id=holder.account_id,
        api_key_id=holder.key_id,
        seller_host=seller.host,
        seller_path=seller.path,
        network=terms.network.caip2,
        asset=terms.token.address_hex,
        pay_to="0x" + terms.pay_to.hex(),
        amount=terms.amount,
        nonce=prepared.nonce,
        valid_before=prepared.valid_before,
        sandbox=sandbox,
        x402_version=terms.x402_version,
        created_at=now,
        tier=decision.tier.value,
        rule=decision.rule,
        reserved_in=reserved_in,
    )


def refusal_record(
    holder: repo.KeyHolder,
    seller: SellerLocation,
    sandbox: bool,
    now: int,
    terms: PaymentTerms,
    refusal: PaymentRefused,
    rule: str | None,
) -> policy_repo.RefusalRecord:
    return policy_repo.RefusalRecord(
        account_id=holder.account_id,
        api_key_id=holder.key_id,
        seller_host=seller.host,
        seller_path=seller.path,
        network=terms.network.caip2,
        amount=terms.amount,
        sandbox=sandbox,
        reason=refusal.slug,
        rule=rule,
        detail=refusal.detail,
        created_at=now,
    )
