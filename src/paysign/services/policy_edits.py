"""The account holder's changes to their source policy: an edit of the whole document, or a
decision on sellers from the approvals queue. Whatever loosens the policy needs a fresh
authenticator code, checked only once the change is known to be valid (a refused change spends
no code); whatever tightens it needs none."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Literal

from paysign.errors import InvalidPolicy
from paysign.policy.document import parse_policy_document
from paysign.policy.loosening import loosens
from paysign.policy.rules import Rule, parse_rule
from paysign.services import policy
from paysign.services.accounts import email_of
from paysign.services.portal_deps import PortalDeps

#: A bulk decision is one transaction; this bounds how long it holds the writer.
MAX_BULK_DECISIONS = 200


def current_policy(deps: PortalDeps, account_id: str) -> dict[str, Any]:
    return policy.get_policy(deps.db, email=email_of(deps.db, account_id))


def change_policy(
    deps: PortalDeps,
    account_id: str,
    edit: Callable[[dict[str, Any]], dict[str, Any]],
    code: str,
) -> tuple[dict[str, Any], bool]:
    """Apply ``edit`` to the current document; returns the new policy and whether a code
    was needed. Raises ``InvalidPolicy`` (nothing changed, no code spent) or
    ``CredentialsRefused`` (a loosening without a fresh code)."""
    email = email_of(deps.db, account_id)
    old = policy.get_policy(deps.db, email=email)
    old.pop("pending", None)
    new = edit(copy.deepcopy(old))
    parse_policy_document(new)  # validate before a code is spent
    needs_code = loosens(old, new)
    if needs_code:
        deps.credentials.fresh_code(account_id, code)
    return policy.set_policy(deps.db, deps.clock, email=email, document=new), needs_code


def freeze(deps: PortalDeps, account_id: str) -> bool:
    """Freeze spending at once: it only tightens, so no code is asked. Whether it changed."""
    email_of(deps.db, account_id)  # the account still exists
    return policy.set_frozen(deps.db, deps.clock, account_id=account_id, frozen=True)


def unfreeze(deps: PortalDeps, account_id: str, code: str) -> bool:
    """Unfreeze spending: it loosens, so a fresh authenticator code is needed (none is spent
    when spending is not frozen). Raises ``CredentialsRefused`` without one."""
    email_of(deps.db, account_id)
    if not policy.is_frozen(deps.db, account_id):
        return False
    deps.credentials.fresh_code(account_id, code)
    return policy.set_frozen(deps.db, deps.clock, account_id=account_id, frozen=False)


def decide_many(
    deps: PortalDeps,
    account_id: str,
    sellers: list[str],
    kind: Literal["allow", "deny"],
    code: str = "",
) -> list[str]:
    """Approve (allow list) or deny (deny list) every seller in ``sellers`` as one change, all
    of them or none; returns the rules written, deduplicated. One fresh code covers an approval
    of them all. Raises ``InvalidPolicy`` (nothing changed, no code spent) or
    ``CredentialsRefused`` (an approval without a fresh code)."""
    email_of(deps.db, account_id)  # the account still exists
    if not sellers:
        raise InvalidPolicy("/sellers", "select at least one seller")
    if len(sellers) > MAX_BULK_DECISIONS:
        raise InvalidPolicy("/sellers", f"decide at most {MAX_BULK_DECISIONS} sellers at a time")
    rules: dict[str, Rule] = {}
    for seller in sellers:
        try:
            rule = parse_rule(seller)
        except ValueError as exc:
            raise InvalidPolicy("/sellers", f"nothing was changed: {exc}") from None
        rules.setdefault(str(rule), rule)
    if kind == "allow":
        deps.credentials.fresh_code(account_id, code)
    policy.decide_rules(
        deps.db, deps.clock, account_id=account_id, rules=list(rules.values()), kind=kind
    )
    return list(rules)
