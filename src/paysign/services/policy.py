"""Reading and changing an account's source policy (operator CLI now, the portal later).

None of these is reachable with an API key: the agent spends within the policy, it never
changes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from paysign.clock import Clock
from paysign.errors import InvalidPolicy
from paysign.policy.document import (
    PolicyDocument,
    parse_policy_document,
    render_policy_document,
)
from paysign.policy.rules import Rule, parse_rule
from paysign.services.accounts import require_account
from paysign.store import policy_repo
from paysign.store.database import Database


def get_policy(db: Database, *, email: str) -> dict[str, Any]:
    account = require_account(db, email)
    with db.read() as conn:
        return render_policy_document(policy_repo.load_document(conn, account.id))


def set_policy(db: Database, clock: Clock, *, email: str, document: object) -> dict[str, Any]:
    """Replace the whole policy (``pending`` is read-only and ignored); returns the new one."""
    parsed = parse_policy_document(document)
    account = require_account(db, email)
    now = clock.now()
    with db.write() as conn:
        policy_repo.save_settings(conn, account.id, parsed.settings, now)
        policy_repo.replace_rules(conn, account.id, parsed, now)
        for rule in (*parsed.allow, *parsed.deny):
            policy_repo.resolve_pending(conn, account.id, rule)
    return get_policy(db, email=email)


def set_frozen(db: Database, clock: Clock, *, account_id: str, frozen: bool) -> bool:
    """Freeze (every payment refused, live and sandbox) or unfreeze the account's spending,
    the rest of its policy unchanged; whether that changed anything."""
    with db.write() as conn:
        return policy_repo.set_frozen(conn, account_id, frozen, clock.now())


def freeze_spending(db: Database, clock: Clock, *, email: str, frozen: bool) -> dict[str, Any]:
    """``set_frozen`` for the operator, by email: what ``paysign admin freeze`` prints."""
    account = require_account(db, email)
    changed = set_frozen(db, clock, account_id=account.id, frozen=frozen)
    return {"email": account.email, "frozen": frozen, "changed": changed}


def is_frozen(db: Database, account_id: str) -> bool:
    with db.read() as conn:
        return policy_repo.load_settings(conn, account_id).frozen


def _rule(seller: str) -> Rule:
    try:
        return parse_rule(seller)
    except ValueError as exc:
        raise InvalidPolicy("/seller", str(exc)) from None


def decide_seller(
    db: Database, clock: Clock, *, email: str, seller: str, kind: Literal["allow", "deny"]
) -> dict[str, Any]:
    """Approve (allow) or deny a seller: the rule goes on one list, off the other, and the
    pending sellers it covers are settled."""
    rule = _rule(seller)
    account = require_account(db, email)
    settled = decide_rules(db, clock, account_id=account.id, rules=[rule], kind=kind)
    return {"rule": str(rule), "list": kind, "pendingResolved": settled}


def decide_rules(
    db: Database,
    clock: Clock,
    *,
    account_id: str,
    rules: Sequence[Rule],
    kind: Literal["allow", "deny"],
) -> int:
    """Put every rule on one list (off the other) and settle the pending sellers they cover,
    in one transaction: all or none. Returns how many pending sellers were settled."""
    now = clock.now()
    settled = 0
    with db.write() as conn:
        for rule in rules:
            policy_repo.add_rule(conn, account_id, kind, rule, now)
            settled += policy_repo.resolve_pending(conn, account_id, rule)
    return settled


__all__ = [
    "PolicyDocument",
    "decide_rules",
    "decide_seller",
    "freeze_spending",
    "get_policy",
    "is_frozen",
    "set_frozen",
    "set_policy",
]
