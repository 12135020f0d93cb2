"""The policy as one JSON document: what ``admin get-policy`` prints and ``set-policy`` takes.

The shape is fixed (DESIGN 7.6; other tools depend on it). Caps are in USDC base units,
``null`` for none; ``pending`` is read-only and ignored on input; rules are ``host[/path]``.
Fields added since are optional on input and mean what their absence always meant
(``payTo``: no payee rules, ``frozen``: false), so an older document keeps its meaning.

    >>> doc = parse_policy_document(render_policy_document(PolicyDocument.defaults()))
    >>> doc.settings.caps.daily, doc.allow, doc.deny
    (10000000, (), ())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from paysign.errors import InvalidPolicy
from paysign.policy.caps import Caps
from paysign.policy.decide import Approval, PolicySettings
from paysign.policy.payees import parse_payee_rules
from paysign.policy.rules import Rule, parse_rule
from paysign.policy.seller_budgets import SellerBudget, parse_allow_entry, render_allow_entry

_REQUIRED = ("approval", "ecosystems", "caps", "allow", "deny")
_OPTIONAL = ("payTo", "frozen")
_KEYS = {*_REQUIRED, *_OPTIONAL, "pending"}
_ECOSYSTEMS = ("premium", "standard", "openEcosystem")
_CAPS = ("perPayment", "daily", "monthly")
#: Caps added since the fixed shape: optional on input, ``null`` (no cap) when left out.
_OPTIONAL_CAPS = ("hourly",)
MAX_RULES_PER_LIST = 100_000


@dataclass(frozen=True, slots=True)
class PolicyDocument:
    settings: PolicySettings
    allow: tuple[Rule, ...]
    deny: tuple[Rule, ...]
    pending: tuple[str, ...] = ()
    #: The allow rules that carry caps of their own (``seller_budgets``).
    budgets: tuple[tuple[Rule, SellerBudget], ...] = ()

    @classmethod
    def defaults(cls) -> PolicyDocument:
        return cls(PolicySettings.defaults(), (), ())


def render_policy_document(doc: PolicyDocument) -> dict[str, Any]:
    s = doc.settings
    budgets = dict(doc.budgets)
    return {
        "approval": s.approval.value,
        "ecosystems": {
            "premium": s.premium,
            "standard": s.standard,
            "openEcosystem": s.open_ecosystem,
        },
        "caps": {
            "perPayment": s.caps.per_payment,
            "daily": s.caps.daily,
            "monthly": s.caps.monthly,
            "hourly": s.caps.hourly,
        },
        "allow": [render_allow_entry(r, budgets.get(r)) for r in doc.allow],
        "deny": [str(r) for r in doc.deny],
        "payTo": s.payees.render(),
        "frozen": s.frozen,
        "pending": list(doc.pending),
    }


def parse_policy_document(obj: object) -> PolicyDocument:
    if not isinstance(obj, dict):
        raise InvalidPolicy("", "the policy must be a JSON object")
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        raise InvalidPolicy(_pointer(unknown[0]), f"unknown field; the fields are {sorted(_KEYS)}")
    for key in _REQUIRED:
        if key not in obj:
            raise InvalidPolicy(f"/{key}", "is required")
    try:
        approval = Approval(obj["approval"])
    except (ValueError, TypeError):
        raise InvalidPolicy("/approval", "must be one of 'none', 'openEcosystem', 'all'") from None
    ecosystems = _flags(obj["ecosystems"])
    caps = _caps(obj["caps"])
    allow, budgets = _allow_rules(obj["allow"])
    deny = _rules(obj["deny"], "deny")
    both = sorted(set(allow) & set(deny))
    if both:
        raise InvalidPolicy("/allow", f"rule {both[0]} is on both the allow and the deny list")
    frozen = obj.get("frozen", False)
    if not isinstance(frozen, bool):
        raise InvalidPolicy("/frozen", "must be true or false")
    payees = parse_payee_rules(obj.get("payTo", {}), "/payTo")
    settings = PolicySettings(approval, *ecosystems, caps, frozen=frozen, payees=payees)
    return PolicyDocument(settings, allow, deny, budgets=budgets)


def _pointer(*tokens: str) -> str:
    """An RFC 6901 JSON pointer: ``~`` and ``/`` inside a member name are escaped."""
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _flags(value: object) -> tuple[bool, bool, bool]:
    if not isinstance(value, dict):
        raise InvalidPolicy("/ecosystems", "must be an object")
    extra = sorted(set(value) - set(_ECOSYSTEMS))
    if extra:
        raise InvalidPolicy(
            _pointer("ecosystems", extra[0]),
            f"unknown switch; the switches are {list(_ECOSYSTEMS)}",
        )
    flags = []
    for name in _ECOSYSTEMS:
        flag = value.get(name)
        if not isinstance(flag, bool):
            raise InvalidPolicy(f"/ecosystems/{name}", "must be true or false")
        flags.append(flag)
    return flags[0], flags[1], flags[2]


def _caps(value: object) -> Caps:
    if not isinstance(value, dict):
        raise InvalidPolicy("/caps", "must be an object")
    known = (*_CAPS, *_OPTIONAL_CAPS)
    extra = sorted(set(value) - set(known))
    if extra:
        raise InvalidPolicy(_pointer("caps", extra[0]), f"unknown cap; the caps are {list(known)}")
    amounts: list[int | None] = []
    for name in known:
        if name not in value and name in _CAPS:
            raise InvalidPolicy(f"/caps/{name}", "is required (use null for no cap)")
        amount = value.get(name)
        if amount is not None and (
            isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount < 2**63
        ):
            raise InvalidPolicy(
                f"/caps/{name}",
                "must be a whole number of USDC base units (1 USDC = 1000000) or null",
            )
        amounts.append(amount)
    return Caps(*amounts)


def _allow_rules(
    value: object,
) -> tuple[tuple[Rule, ...], tuple[tuple[Rule, SellerBudget], ...]]:
    """The allow list: rules, some with a budget (``seller_budgets``). A rule listed twice keeps
    its first place and the last budget given with it."""
    _check_list(value, "allow", "'host[/path]' strings or {\"seller\": ...} objects")
    assert isinstance(value, list)
    rules: dict[Rule, None] = {}
    budgets: dict[Rule, SellerBudget] = {}
    for i, entry in enumerate(value):
        rule, budget = parse_allow_entry(entry, f"/allow/{i}")
        rules[rule] = None
        if budget is not None:
            budgets[rule] = budget
    return tuple(rules), tuple(budgets.items())


def _check_list(value: object, name: str, what: str) -> None:
    if not isinstance(value, list):
        raise InvalidPolicy(f"/{name}", f"must be an array of {what}")
    if len(value) > MAX_RULES_PER_LIST:
        raise InvalidPolicy(f"/{name}", f"may hold at most {MAX_RULES_PER_LIST} rules")


def _rules(value: object, name: str) -> tuple[Rule, ...]:
    _check_list(value, name, "'host[/path]' strings")
    assert isinstance(value, list)
    rules: dict[Rule, None] = {}
    for i, text in enumerate(value):
        try:
            rules[parse_rule(text)] = None
        except ValueError as exc:
            raise InvalidPolicy(f"/{name}/{i}", str(exc)) from None
    return tuple(rules)
