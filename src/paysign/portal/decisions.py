"""The approvals queue: one pending seller, or several, approved or denied as one change.

Every seller is checked before anything is written, one fresh authenticator code covers an
approval of them all (it loosens the policy), and the rules are written in one transaction —
all of them or none.
"""

from __future__ import annotations

from typing import Literal

from paysign.errors import InvalidPolicy
from paysign.policy.rules import Rule, parse_rule
from paysign.portal.service import PortalService
from paysign.services import policy

#: A bulk decision is one transaction; this bounds how long it holds the writer.
MAX_BULK_DECISIONS = 200


def decide_many(
    service: PortalService,
    account_id: str,
    sellers: list[str],
    kind: Literal["allow", "deny"],
    code: str = "",
) -> list[str]:
    """Approve (allow list) or deny (deny list) every seller in ``sellers``; returns the rules
    written, deduplicated. Raises ``InvalidPolicy`` (nothing changed, no code spent) or
    ``CredentialsRefused`` (an approval without a fresh code)."""
    service.email_of(account_id)  # the account still exists
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
        service.credentials.fresh_code(account_id, code)
    policy.decide_rules(
        service.db, service.clock, account_id=account_id, rules=list(rules.values()), kind=kind
    )
    return list(rules)
