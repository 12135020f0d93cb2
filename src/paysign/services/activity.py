"""The account's audit trail: every signature and every refusal, newest first.

Each entry says what was decided (``signed`` or ``refused``), why (the problem slug of a
refusal), and which rule or switch decided it, so the holder can see what their agent did.
"""

from __future__ import annotations

from typing import Any

from paysign.policy.caps import iso
from paysign.services.accounts import require_account
from paysign.store import policy_repo
from paysign.store import repositories as repo
from paysign.store.database import Database


def activity(db: Database, *, email: str, limit: int = 100) -> list[dict[str, Any]]:
    account = require_account(db, email)
    with db.read() as conn:
        signed = repo.signatures_of(conn, account.id)
        refused = policy_repo.refusals_of(conn, account.id)
    entries: list[tuple[int, int, dict[str, Any]]] = []
    for i, s in enumerate(signed):
        entry = {
            "at": iso(s.created_at),
            "decision": "signed",
            "seller": f"{s.seller_host}{s.seller_path}",
            "amount": s.amount,
            "network": s.network,
            "sandbox": s.sandbox,
            "status": s.status,
            "tier": s.tier,
            "rule": s.rule,
            "nonce": "0x" + s.nonce.hex(),
        }
        entries.append((s.created_at, i, entry))
    for j, r in enumerate(refused):
        entry = {
            "at": iso(r.created_at),
            "decision": "refused",
            "seller": f"{r.seller_host}{r.seller_path}",
            "amount": r.amount,
            "network": r.network,
            "sandbox": r.sandbox,
            "reason": r.reason,
            "rule": r.rule,
            "detail": r.detail,
        }
        entries.append((r.created_at, len(signed) + j, entry))
    entries.sort(key=lambda e: (e[0], e[1]), reverse=True)
    return [entry for _, _, entry in entries[:limit]]
