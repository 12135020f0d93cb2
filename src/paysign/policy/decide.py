"""The source-policy decision: pure, ordered deny → ecosystem switch → allow list / pending.

>>> from paysign.policy.rules import parse_rule, seller_location
>>> policy = PolicySettings.defaults()
>>> where = seller_location("https://api.example.com/v1/quote")
>>> decide(policy, [], where, Tier.OPEN_ECOSYSTEM).outcome
<Outcome.PENDING: 'pending'>
>>> decide(policy, [Grant("allow", parse_rule("api.example.com"))], where,
...        Tier.OPEN_ECOSYSTEM).outcome
<Outcome.ALLOWED: 'allowed'>
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from paysign.policy.caps import Caps
from paysign.policy.payees import NO_PAYEE_RULES, PayeeRules
from paysign.policy.rules import Rule
from paysign.policy.seller import SellerLocation
from paysign.policy.seller_budgets import SellerBudget

#: The most sellers an account's approvals queue holds. Whoever holds the API key names the
#: sellers, so without a bound a stolen or misled agent could bury the holder's real approvals
#: under made-up ones. A new seller past it is refused without being queued; the holder makes
#: room by approving or denying, or makes the question moot with allow rules.
MAX_PENDING_SELLERS = 100


class Tier(enum.Enum):
    PREMIUM = "PREMIUM"
    STANDARD = "STANDARD"
    OPEN_ECOSYSTEM = "OPEN_ECOSYSTEM"

    @property
    def switch_name(self) -> str:
        return {"PREMIUM": "premium", "STANDARD": "standard"}.get(self.value, "openEcosystem")


class Approval(enum.Enum):
    NONE = "none"
    OPEN_ECOSYSTEM = "openEcosystem"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class PolicySettings:
    approval: Approval
    premium: bool
    standard: bool
    open_ecosystem: bool
    caps: Caps
    #: Every payment refused, live and sandbox, until the account holder unfreezes it.
    frozen: bool = False
    payees: PayeeRules = NO_PAYEE_RULES

    @classmethod
    def defaults(cls) -> PolicySettings:
        return cls(Approval.OPEN_ECOSYSTEM, True, True, True, Caps.defaults())

    def ecosystem_enabled(self, tier: Tier) -> bool:
        return {
            Tier.PREMIUM: self.premium,
            Tier.STANDARD: self.standard,
            Tier.OPEN_ECOSYSTEM: self.open_ecosystem,
        }[tier]

    def needs_approval(self, tier: Tier) -> bool:
        if self.approval is Approval.ALL:
            return True
        return self.approval is Approval.OPEN_ECOSYSTEM and tier is Tier.OPEN_ECOSYSTEM


@dataclass(frozen=True, slots=True)
class Grant:
    """A rule on the account's allow or deny list."""

    kind: Literal["allow", "deny"]
    rule: Rule
    #: An allow rule's own caps (``seller_budgets``), if it has any.
    budget: SellerBudget | None = None


class Outcome(enum.Enum):
    ALLOWED = "allowed"
    DENIED = "denied"
    ECOSYSTEM_DISABLED = "ecosystem-disabled"
    PENDING = "pending"


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    reason: str  # for the audit and the problem detail
    rule: str | None  # the rule or switch that decided, as the policy document spells it
    tier: Tier
    #: The budgets of the allow rules that match (an allowed payment reserves in each),
    #: in the order of the rules' text (the order their windows are locked in).
    budgets: tuple[tuple[Rule, SellerBudget], ...] = ()

    @property
    def allowed(self) -> bool:
        return self.outcome is Outcome.ALLOWED


def _most_specific(matches: Iterable[Grant]) -> Grant | None:
    # Report the narrowest matching rule: exact host before wildcard, longer path first.
    return max(
        matches,
        key=lambda g: (not g.rule.is_wildcard, len(g.rule.host), len(g.rule.path)),
        default=None,
    )


def decide(
    policy: PolicySettings, grants: Iterable[Grant], where: SellerLocation, tier: Tier
) -> Decision:
    """Judge one seller location. ``grants`` may hold unrelated rules: only matches count."""
    grants = tuple(grants)
    deny = _most_specific(g for g in grants if g.kind == "deny" and g.rule.matches_any_case(where))
    if deny is not None:
        return Decision(
            Outcome.DENIED, f"{where} matches deny rule {deny.rule}", str(deny.rule), tier
        )
    if not policy.ecosystem_enabled(tier):
        switch = tier.switch_name
        return Decision(
            Outcome.ECOSYSTEM_DISABLED,
            f"{where} is a {tier.value} seller and the {switch} switch is off",
            f"ecosystems.{switch}",
            tier,
        )
    allowing = [g for g in grants if g.kind == "allow" and g.rule.matches(where)]
    allow = _most_specific(allowing)
    if allow is not None:
        # Every budget the seller falls under binds, in any letter case of its path: with
        # "/premium" budgeted under an allowed host, "/PREMIUM" is the same paid API to many
        # servers, and must not be a way around the budget.
        budgeted = (
            (g.rule, g.budget)
            for g in grants
            if g.kind == "allow" and g.budget and g.rule.matches_any_case(where)
        )
        budgets = tuple(sorted(budgeted, key=lambda budget: str(budget[0])))
        reason = f"{where} matches allow rule {allow.rule}"
        return Decision(Outcome.ALLOWED, reason, str(allow.rule), tier, budgets)
    if policy.needs_approval(tier):
        return Decision(
            Outcome.PENDING,
            f"{where} needs approval (approval: {policy.approval.value}) and is not allowed yet",
            f"approval.{policy.approval.value}",
            tier,
        )
    return Decision(
        Outcome.ALLOWED,
        f"{where} needs no approval (approval: {policy.approval.value})",
        f"approval.{policy.approval.value}",
        tier,
    )
