"""Budgets per seller: an allow rule may carry its own daily and monthly caps.

An entry of the policy's ``allow`` list is a rule string, or an object that is the same rule
with caps of its own: ``{"seller": "HOST[:PORT]/PATH", "daily": N, "monthly": N}`` (USDC base
units, each optional). A payment to a seller the rule matches reserves against the account's
caps and the rule's, at once or not at all. A rule's spend is kept under the rule's text, so it
survives the policy being saved again, and a rule whose budget is removed keeps no spend.

    >>> rule, budget = parse_allow_entry({"seller": "API.example.com/v1", "daily": 2000000}, "/a")
    >>> str(rule), budget
    ('api.example.com/v1', SellerBudget(daily=2000000, monthly=None))
    >>> render_allow_entry(rule, budget)
    {'seller': 'api.example.com/v1', 'daily': 2000000, 'monthly': None}
    >>> parse_allow_entry("api.example.com", "/a")[1] is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from paysign.errors import InvalidPolicy
from paysign.policy.rules import Rule, parse_rule

_BUDGET_KEYS = ("daily", "monthly")


@dataclass(frozen=True, slots=True)
class SellerBudget:
    daily: int | None = None
    monthly: int | None = None

    def limit_of(self, window: str) -> int | None:
        return {"daily": self.daily, "monthly": self.monthly}.get(window)

    def __bool__(self) -> bool:
        return self.daily is not None or self.monthly is not None


def parse_allow_entry(entry: object, pointer: str) -> tuple[Rule, SellerBudget | None]:
    """A rule string, or ``{"seller": ..., "daily": ..., "monthly": ...}``; ``InvalidPolicy``
    naming the place otherwise. A budget with neither cap is no budget."""
    if not isinstance(entry, dict):
        return _rule(entry, pointer), None
    extra = sorted(set(entry) - {"seller", *_BUDGET_KEYS})
    if extra:
        raise InvalidPolicy(
            f"{pointer}/{extra[0]}", "unknown field; an allow entry has seller, daily, monthly"
        )
    if "seller" not in entry:
        raise InvalidPolicy(f"{pointer}/seller", "is required (the rule, 'host[/path]')")
    rule = _rule(entry["seller"], f"{pointer}/seller")
    amounts: list[int | None] = []
    for name in _BUDGET_KEYS:
        amount = entry.get(name)
        if amount is not None and (
            isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount < 2**63
        ):
            raise InvalidPolicy(
                f"{pointer}/{name}",
                "must be a whole number of USDC base units (1 USDC = 1000000) or null",
            )
        amounts.append(amount)
    budget = SellerBudget(*amounts)
    return rule, budget if budget else None


def _rule(text: object, pointer: str) -> Rule:
    try:
        return parse_rule(text)  # type: ignore[arg-type]  # parse_rule refuses a non-string
    except ValueError as exc:
        raise InvalidPolicy(pointer, str(exc)) from None


def render_allow_entry(rule: Rule, budget: SellerBudget | None) -> str | dict[str, Any]:
    if budget is None:
        return str(rule)
    return {"seller": str(rule), "daily": budget.daily, "monthly": budget.monthly}


def entry_rule_text(entry: object) -> str:
    """The rule an allow entry of a rendered document names (its ``seller`` for an object)."""
    if isinstance(entry, dict):
        return str(entry.get("seller", ""))
    return str(entry)
