"""What the wallet can still spend, as ``GET /wallets/status`` answers it, in base units.

>>> status = WalletStatus.from_json({
...     "frozen": False, "canSpendNowUsdc": "1",
...     "caps": [{"cap": "daily", "limitUsdc": "10", "spentUsdc": "0.25",
...               "remainingUsdc": "9.75", "resetsAt": "2026-09-22T00:00:00Z"}],
...     "sellerBudgets": {"total": 1, "budgets": [{"rule": "api.example.com/weather",
...         "cap": "daily", "limitUsdc": "2", "spentUsdc": "0.5", "remainingUsdc": "1.5",
...         "resetsAt": "2026-09-22T00:00:00Z"}]},
...     "pendingApprovals": {"total": 0, "sellers": []}, "seller": None,
...     "sandbox": {"balanceUsdc": None}, "apiKeyExpiresAt": None})
>>> status.cap("daily").remaining, status.can_spend_now
(9750000, 1000000)
>>> [(b.rule, b.cap, b.remaining) for b in status.seller_budgets]
[('api.example.com/weather', 'daily', 1500000)]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from paysign.client.wire import parse_usdc

__all__ = ["BudgetRoom", "CapRoom", "WalletStatus"]


def _units(text: Any) -> int | None:
    return None if text is None else parse_usdc(str(text))


@dataclass(frozen=True, slots=True)
class CapRoom:
    """One spend cap: ``None`` limit and remaining when the cap is off; ``resets_at`` (ISO
    8601, UTC) ``None`` for the per-payment cap."""

    cap: str
    limit: int | None
    spent: int
    remaining: int | None
    resets_at: str | None


@dataclass(frozen=True, slots=True)
class BudgetRoom:
    """One cap (``daily`` or ``monthly``) of an allow rule's own budget: a payment to a seller
    ``rule`` matches needs room here as well as under the account's caps."""

    rule: str
    cap: str
    limit: int | None
    spent: int
    remaining: int | None
    resets_at: str | None


def _room(entry: dict[str, Any]) -> tuple[str, int | None, int, int | None, Any]:
    return (
        str(entry["cap"]),
        _units(entry.get("limitUsdc")),
        _units(entry.get("spentUsdc")) or 0,
        _units(entry.get("remainingUsdc")),
        entry.get("resetsAt"),
    )


@dataclass(frozen=True, slots=True)
class WalletStatus:
    frozen: bool
    can_spend_now: int | None  # the most one live payment may cost now
    caps: list[CapRoom]
    seller_budgets: list[BudgetRoom]
    budgeted_rules: int  # how many allow rules carry a budget (the first ones are listed)
    pending_total: int
    pending_sellers: list[str]
    #: Whether the seller asked about (``status(seller=...)``) waits for approval.
    seller_pending: bool | None
    sandbox_balance: int | None
    api_key_expires_at: str | None
    document: dict[str, Any] = field(repr=False)  # the answer as sent

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> WalletStatus:
        pending = body.get("pendingApprovals") or {}
        seller = body.get("seller")
        budgets = body.get("sellerBudgets") or {}
        return cls(
            frozen=bool(body.get("frozen")),
            can_spend_now=_units(body.get("canSpendNowUsdc")),
            caps=[CapRoom(*_room(c)) for c in body.get("caps") or []],
            seller_budgets=[
                BudgetRoom(str(b["rule"]), *_room(b)) for b in budgets.get("budgets") or []
            ],
            budgeted_rules=int(budgets.get("total") or 0),
            pending_total=int(pending.get("total") or 0),
            pending_sellers=[str(s) for s in pending.get("sellers") or []],
            seller_pending=None if not isinstance(seller, dict) else seller.get("pendingApproval"),
            sandbox_balance=_units((body.get("sandbox") or {}).get("balanceUsdc")),
            api_key_expires_at=body.get("apiKeyExpiresAt"),
            document=body,
        )

    def cap(self, name: str) -> CapRoom | None:
        """The cap named ``name`` (``perPayment``, ``daily``, ``monthly``, …)."""
        return next((c for c in self.caps if c.cap == name), None)
