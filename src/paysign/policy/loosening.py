"""Whether a change to a source policy loosens it: lets the agent do anything it could not do
before. A loosening needs a fresh authenticator code; a tightening never does."""

from __future__ import annotations

from typing import Any

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
    """
    if _APPROVAL_RANK[new["approval"]] < _APPROVAL_RANK[old["approval"]]:
        return True
    if any(on and not old["ecosystems"].get(name) for name, on in new["ecosystems"].items()):
        return True
    for name, cap in old["caps"].items():
        raised = new["caps"].get(name)
        if cap is not None and (raised is None or raised > cap):
            return True
    if set(new["allow"]) - set(old["allow"]):
        return True
    return bool(set(old["deny"]) - set(new["deny"]))
