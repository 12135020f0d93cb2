"""Paying a seller on the user's behalf: call → 402 → terms → sign (the signing use case, so the
source policy and caps apply) → pay → the seller's answer and the settlement receipt.

Only the payment option paysign can sign on the wanted network is offered to the signing use
case (it signs ``accepts[0]``): the USDC option on the testnet for a sandbox call, on mainnet
otherwise. The seller's terms are otherwise passed through verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from paysign.connector.outbound import FetchedResponse, Outbound, OutboundRefused
from paysign.connector.results import next_step
from paysign.errors import NotAuthenticated, PaysignError
from paysign.http.credentials import call_store
from paysign.policy.caps import iso
from paysign.policy.seller import seller_location
from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA
from paysign.protocol.payment_required import (
    ChosenOption,
    NoUsableOption,
    PaymentRequired,
    UnreadableTerms,
    choose_option,
    decode_payment_required,
    decode_settlement,
    payment_header_name,
)
from paysign.protocol.untrusted import untrusted_json
from paysign.protocol.usdc import format_usdc
from paysign.services.signing import HolderLoader, SigningDeps, sign_payment_for


class ToolFailure(Exception):
    """A call that ends as a tool error: ``what_to_do`` tells the assistant the next step."""

    def __init__(self, kind: str, detail: str, what_to_do: str, **extra: Any) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.what_to_do = what_to_do
        self.extra = extra
        self.result: dict[str, Any] | None = None

    def document(self) -> dict[str, Any]:
        human_must_act, retry_can_help = next_step(self.kind)
        error = {
            "type": self.kind,
            "detail": self.detail,
            "whatToDo": self.what_to_do,
            "humanMustAct": human_must_act,
            "retryCanHelp": retry_can_help,
        }
        error.update(self.extra)
        out: dict[str, Any] = {"error": error}
        if self.result is not None:
            out.update(self.result)
        return out


@dataclass(frozen=True, slots=True)
class SellerCall:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    sandbox: bool = False
    max_amount: int | None = None  # base units; refuse before signing above it
    service_id: str | None = None  # the catalog listing id, for provenance


def payment_terms(response: FetchedResponse) -> PaymentRequired:
    """The terms of a 402: the v2 ``PAYMENT-REQUIRED`` header, else the v1 JSON body."""
    try:
        return decode_payment_required(response.headers, response.body)
    except UnreadableTerms as exc:
        raise ToolFailure(
            "invalid-payment-terms",
            f"The seller answered 402 Payment Required without readable x402 terms ({exc}).",
            "This endpoint cannot be paid with x402; try another seller.",
        ) from None


def choose(deps: SigningDeps, required: PaymentRequired, sandbox: bool) -> ChosenOption:
    """The seller's USDC option on the wanted network (testnet in sandbox), moved first."""
    network = BASE_SEPOLIA if sandbox else BASE_MAINNET
    token = deps.registry.usdc_for(network)
    usdc = {} if token is None else {network.caip2: token.address_hex}
    try:
        return choose_option(required, network, usdc=usdc)
    except NoUsableOption:
        offered = [
            str(entry.get("network")) for entry in required.accepts if isinstance(entry, dict)
        ]
        wanted = "Base Sepolia testnet USDC" if sandbox else "Base mainnet USDC"
        hint = (
            "Call again without sandbox to pay on Base mainnet."
            if sandbox
            else "If this is a test endpoint, call again with sandbox=true."
        )
        raise ToolFailure(
            "no-usable-payment-option",
            f"The seller offers no {wanted} 'exact' payment option (offered networks: "
            f"{', '.join(offered) or 'none'}).",
            hint,
            offeredNetworks=offered,
        ) from None


def seller_body(response: FetchedResponse) -> Any:
    content_type = response.headers.get("content-type", "")
    if "json" in content_type:
        try:
            return untrusted_json(response.body)
        except ValueError:
            pass
    return response.text()


def refusal_failure(error: PaysignError, portal_url: str) -> ToolFailure:
    """What the assistant should do about a refusal by the signing use case."""
    ext = error.extensions
    listed = ext.get("listedPrice")
    listed_price = f"{format_usdc(listed)} USDC" if isinstance(listed, int) else "its price"
    todo = {
        "allow-pending": (
            "The account holder must approve this seller before it can be paid. Tell the user "
            f"to approve {ext.get('sellerHost', 'the seller')} in the paysign portal at "
            f"{portal_url}; do not retry until they say it is approved."
        ),
        "pending-approvals-full": (
            "Too many sellers are waiting for the account holder's approval; this new one was "
            "not added. Stop trying other new sellers: tell the user to approve or deny the "
            f"waiting sellers in the paysign portal at {portal_url}, or to add allow rules, "
            "and retry only when they say so."
        ),
        "seller-denied": (
            "The account holder has put this seller on the deny list. Do not retry; choose "
            f"another seller, or ask the user to change the deny list in the portal at "
            f"{portal_url}."
        ),
        "ecosystem-disabled": (
            "Payments to this ecosystem are switched off for this account. Choose another "
            f"seller, or ask the user to switch it on in the portal at {portal_url}."
        ),
        "spend-cap-exceeded": (
            f"The {ext.get('cap', 'spend')} cap would be passed; "
            + (
                f"it resets at {ext['resetsAt']}. "
                if ext.get("resetsAt")
                else "it does not reset by itself. "
            )
            + "Tell the user; do not retry before then unless they raise the cap in the portal "
            f"at {portal_url}. Sandbox calls (sandbox=true) are not capped."
        ),
        "spending-frozen": (
            "The account holder has frozen all spending, live and sandbox. Do not retry and do "
            "not try other sellers: tell the user, who can unfreeze it in the paysign portal at "
            f"{portal_url} (wallet_status shows when it is unfrozen)."
        ),
        "payee-denied": (
            f"The account holder's payee rules refuse paying {ext.get('payTo', 'this address')}. "
            "Do not retry; choose another seller, or ask the user to change the payee rules in "
            f"the portal at {portal_url}."
        ),
        "price-above-listing": (
            f"This seller's catalog listing publishes {listed_price}, and it asked for more; "
            "its endpoint may be spoofed or compromised. Nothing was signed. Do not retry or pay "
            "it another way: tell the user, and choose another seller."
        ),
        "payee-mismatch": (
            "This seller's terms pay an address other than the one its catalog listing "
            "publishes; its endpoint may be spoofed or compromised. Nothing was signed. Do not "
            "retry or pay it another way: tell the user, and choose another seller."
        ),
        "sandbox-network-mismatch": "Call again without sandbox to pay on Base mainnet.",
        "seller-resource-mismatch": (
            "The seller's payment terms are for a resource on another host "
            f"({ext.get('resourceHost', 'unknown')}); nothing was signed. Do not retry; tell "
            "the user and choose another seller."
        ),
    }.get(
        error.slug,
        "The seller's payment terms cannot be signed as they are; try another seller.",
    )
    extra = {k: v for k, v in ext.items() if k != "pointer"}
    return ToolFailure(error.slug, error.detail, todo, title=error.title, **extra)


async def pay(
    deps: SigningDeps,
    outbound: Outbound,
    payer: HolderLoader,
    call: SellerCall,
    *,
    portal_url: str,
) -> dict[str, Any]:
    try:
        # The signing use case would refuse this URL after the seller was called; a URL the
        # source policy cannot judge is not called at all.
        seller_location(call.url)
    except ValueError as exc:
        raise ToolFailure(
            "invalid-seller-url",
            f"The URL {call.url[:200]!r} cannot be paid: it {exc}.",
            "Call again with the seller's URL spelled as the seller publishes it.",
        ) from None
    headers = {"Accept": "application/json, */*;q=0.5", **call.headers}
    if call.sandbox:
        headers["X-Sandbox-Mode"] = "true"
    first = await outbound.request(call.method, call.url, headers=headers, content=call.body)
    provenance = {"service_id": call.service_id, "seller_url": first.url}
    if first.status != 402:
        return {
            "status": first.status,
            "body": seller_body(first),
            "payment": None,
            "provenance": provenance,
        }
    terms = payment_terms(first)
    chosen = choose(deps, terms, call.sandbox)
    option, amount = chosen.option, chosen.amount
    network = str(option.get("network"))
    quote = {"amount": str(amount), "amountUsdc": format_usdc(amount), "network": network}
    if call.max_amount is not None and amount > call.max_amount:
        raise ToolFailure(
            "price-above-maximum",
            f"The seller asks {format_usdc(amount)} USDC, more than the maximum of "
            f"{format_usdc(call.max_amount)} USDC for this call. Nothing was signed.",
            "Ask the user whether to pay this price, then call again with a higher "
            "maxAmountUsdc (pay_x402), or choose another seller.",
            **quote,
        )
    request = {"sellerUrl": first.url, "paymentRequired": chosen.payment_required}
    try:
        signed = await call_store(
            deps, sign_payment_for, deps, payer, request, sandbox=call.sandbox
        )
    except NotAuthenticated:
        raise ToolFailure(
            "unauthorized",
            "The credential of this connection is no longer valid (expired or revoked).",
            "Ask the user for a new API key and reconnect.",
        ) from None
    except PaysignError as exc:
        raise refusal_failure(exc, portal_url) from None
    version = terms.version
    header_name = payment_header_name(version)
    payment = {
        **quote,
        "asset": option.get("asset"),
        "payTo": option.get("payTo"),
        "sandbox": call.sandbox,
        "x402Version": version,
        "nonce": "0x" + signed.nonce.hex(),
        "validBefore": signed.valid_before,
        "settled": False,
        "transaction": None,
        "settlement": None,
    }
    try:
        paid = await outbound.request(
            call.method,
            first.url,
            headers={**headers, header_name: signed.header},
            content=call.body,
        )
    except OutboundRefused as refused:
        raise _sent_unanswered(refused.detail, payment, provenance) from None
    decoded = decode_settlement(paid.headers)
    receipt = None if decoded is None else decoded.raw
    payment.update(
        settled=bool(receipt and receipt.get("success")),
        transaction=(receipt or {}).get("transaction") or None,
        settlement=receipt,
    )
    result = {
        "status": paid.status,
        "body": seller_body(paid),
        "payment": payment,
        "provenance": provenance,
    }
    if paid.status >= 400:
        failure = ToolFailure(
            "seller-rejected-payment",
            f"The payment was signed but the seller answered {paid.status}"
            + (f" ({receipt.get('errorReason')})" if receipt and receipt.get("errorReason") else "")
            + ". Unless the receipt shows a transaction, no money moved; the signature expires "
            "unused and its reservation is released.",
            "Tell the user the seller did not accept the payment; do not retry in a loop.",
        )
        failure.result = result
        raise failure
    return result


def _sent_unanswered(why: str, payment: dict[str, Any], provenance: dict[str, Any]) -> ToolFailure:
    """The signature went to the seller, whose answer never came or could not be read: the
    seller holds a payment it may still settle, so the assistant must not sign another."""
    failure = ToolFailure(
        "payment-sent-unanswered",
        f"A payment of {payment['amountUsdc']} USDC was signed and sent to the seller, but its "
        f"answer could not be read: {why}. The seller may still settle it until "
        f"{iso(payment['validBefore'])}; if it does not, the payment expires unused and its "
        "reservation is released.",
        "Do not call again for this purchase: that would sign a second payment. Tell the user "
        "the payment was sent without an answer; wallet_status and the portal's activity show "
        "whether it settled.",
    )
    failure.result = {"payment": payment, "provenance": provenance}
    return failure


__all__ = ["OutboundRefused", "SellerCall", "ToolFailure", "pay"]
