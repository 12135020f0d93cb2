"""Whether a change to a source policy loosens it: lets the agent do anything it could not do
before. A loosening needs a fresh authenticator code; a tightening never does."""

from __future__ import annotations

from typing import Any

from paysign.policy.seller_budgets import entry_rule_text

_APPROVAL_RANK = {"none": 0, "openEcosystem": 1, "all": 2}


def loosens(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether ``new`` lets the agent do anything ``old`` did not (so it needs a fresh code).

    >>> base = {"approval": "all", "ecosystems": {"premium": False}, "caps": {"daily": 5},
    ...         "allow": [], "deny": ["bad.example"]}
    >>> loosens(base, {**base, "caps": {"daily": 4}})
    False
    >>> loosens(base, {**base, "caps": {"daily": None}})
    True
    >>> loosens(base, {**base, "deny": []}), loosens(base, {**base, "allow": ["a.example"]})
    (True, True)
    >>> loosens(base, {**base, "approval": "none"})
    True
    >>> loosens(base, {**base, "deny": ["x.example", "bad.example"]})
    False
    >>> loosens({**base, "frozen": True}, base), loosens(base, {**base, "frozen": True})
    (True, False)
    >>> payee = "0x" + "ab" * 20
    >>> loosens(base, {**base, "payTo": {"allow": [payee], "deny": []}})
    False
    >>> loosens({**base, "payTo": {"allow": [payee], "deny": []}}, base)
    True
    >>> budget = {"seller": "a.example", "daily": 5}
    >>> with_budget = {**base, "allow": [budget]}
    >>> loosens(with_budget, {**base, "allow": [{**budget, "daily": 4}]})
    False
    >>> loosens(with_budget, {**base, "allow": ["a.example"]}), loosens(base, with_budget)
    (True, True)
    """
    if old.get("frozen", False) and not new.get("frozen", False):
        return True
    if _payees_loosen(old.get("payTo") or {}, new.get("payTo") or {}):
        return True
    if _APPROVAL_RANK[new["approval"]] < _APPROVAL_RANK[old["approval"]]:
        return True
    if any(on and not old["ecosystems"].get(name) for name, on in new["ecosystems"].items()):
        return True
    for name, cap in old["caps"].items():
        raised = new["caps"].get(name)
        if cap is not None and (raised is None or raised > cap):
            return True
    if _allow_loosens(old["allow"], new["allow"]):
        return True
    return bool(set(old["deny"]) - set(new["deny"]))


def _allow_loosens(old: list[Any], new: list[Any]) -> bool:
    """A new allow rule, or an allow rule's budget (``seller_budgets``) raised or removed."""
    before = {entry_rule_text(e): _budget(e) for e in old}
    for entry in new:
        rule = entry_rule_text(entry)
        if rule not in before:
            return True
        was, now = before[rule], _budget(entry)
        for name, cap in was.items():
            raised = now.get(name)
            if cap is not None and (raised is None or raised > cap):
                return True
    return False


def _budget(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {}
    return {"daily": entry.get("daily"), "monthly": entry.get("monthly")}


def _payees_loosen(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """A payee taken off the deny list, or a payee allow list that admits more: one that grew
    or (emptied) no longer limits at all. Addresses compare in any letter case."""
    old_deny = {a.lower() for a in old.get("deny", [])}
    if old_deny - {a.lower() for a in new.get("deny", [])}:
        return True
    old_allow = {a.lower() for a in old.get("allow", [])}
    new_allow = {a.lower() for a in new.get("allow", [])}
    if not old_allow:
        return False
    return not new_allow or bool(new_allow - old_allow)
