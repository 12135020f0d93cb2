"""Tool errors: :class:`ToolFailure`, and what the assistant should do about each refusal of
the signing use case."""

from __future__ import annotations

from typing import Any

from paysign.connector.results import next_step
from paysign.errors import PaysignError
from paysign.protocol.usdc import format_usdc


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
