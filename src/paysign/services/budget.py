"""What the account can still spend, as its agent reads it: the room left under each cap and
when each window resets, the sellers waiting for the holder's approval, the sandbox balance and
the API key's expiry, and the room left under each allow rule's own budget. The API
(``GET /wallets/status``), the connector's ``wallet_status`` tool, the Python client and
``paysign status`` all answer with :meth:`WalletStatus.document`.

The windowed caps are the ones the signing path reserves (:func:`capped_windows`), each with its
limit from ``Caps.limit_of``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy.engine import Connection

from paysign.chain.errors import ChainError
from paysign.chain.testnet import SandboxChain
from paysign.clock import Clock
from paysign.errors import AccountNotFound
from paysign.policy.caps import Caps, Window, hour_window, iso, windows_at
from paysign.policy.decide import MAX_PENDING_SELLERS
from paysign.policy.rules import Rule
from paysign.policy.seller import seller_location
from paysign.policy.seller_budgets import SellerBudget
from paysign.protocol import parse_address
from paysign.protocol.networks import BASE_SEPOLIA
from paysign.protocol.usdc import format_usdc
from paysign.services.portal_overview import active_key
from paysign.store import policy_repo, portal_repo
from paysign.store.database import Database
from paysign.store.policy_repo import PendingSeller

log = structlog.get_logger("paysign.budget")

#: The pending sellers listed by name; beyond them only the count is given.
LISTED_PENDING = 20
#: The budgeted allow rules listed (in the order of their text); beyond them only the count.
LISTED_BUDGETS = 50
#: How much of a seller the policy cannot name is said back.
MAX_SELLER_ECHO = 300


@dataclass(frozen=True, slots=True)
class CapRoom:
    """One cap: its limit (``None``: no cap), spent and left in its current window (base
    units), and when that window resets (Unix seconds; ``None`` for the per-payment cap)."""

    name: str
    limit: int | None
    spent: int
    resets_at: int | None

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.spent)


@dataclass(frozen=True, slots=True)
class BudgetRoom:
    """One cap of an allow rule's budget (``rule`` as the policy spells it): a payment to a
    seller the rule matches needs room here as well as under the account's caps."""

    rule: str
    room: CapRoom


@dataclass(frozen=True, slots=True)
class WalletStatus:
    wallet_address: str | None
    frozen: bool
    caps: list[CapRoom]
    seller_budgets: list[BudgetRoom]
    #: How many allow rules carry a budget (only the first ``LISTED_BUDGETS`` are listed).
    budgeted_rules: int
    pending_total: int
    pending: list[PendingSeller]
    #: The seller asked about (canonical ``host/path``) and whether it waits for approval.
    seller: str | None
    seller_pending: bool | None
    sandbox_balance: int | None
    key_expires_at: int | None
    now: int

    @property
    def can_spend_now(self) -> int | None:
        """The most one live payment may cost right now: the least room of every cap."""
        rooms = [c.remaining for c in self.caps if c.remaining is not None]
        return 0 if self.frozen else (min(rooms) if rooms else None)

    def document(self) -> dict[str, Any]:
        def usdc(amount: int | None) -> str | None:
            return None if amount is None else format_usdc(amount)

        def room(c: CapRoom) -> dict[str, Any]:
            return {
                "cap": c.name,
                "limitUsdc": usdc(c.limit),
                "spentUsdc": format_usdc(c.spent),
                "remainingUsdc": usdc(c.remaining),
                "resetsAt": None if c.resets_at is None else iso(c.resets_at),
            }

        return {
            "walletAddress": self.wallet_address,
            "frozen": self.frozen,
            "canSpendNowUsdc": usdc(self.can_spend_now),
            "caps": [room(c) for c in self.caps],
            "sellerBudgets": {
                "total": self.budgeted_rules,
                "budgets": [{"rule": b.rule, **room(b.room)} for b in self.seller_budgets],
            },
            "pendingApprovals": {
                "total": self.pending_total,
                "sellers": [f"{p.host}{p.path}" for p in self.pending],
            },
            "seller": None
            if self.seller is None
            else {"seller": self.seller, "pendingApproval": self.seller_pending},
            "sandbox": {
                "network": BASE_SEPOLIA.caip2,
                "balanceUsdc": usdc(self.sandbox_balance),
                "uncapped": True,
            },
            "apiKeyExpiresAt": None if self.key_expires_at is None else iso(self.key_expires_at),
            "asOf": iso(self.now),
        }


_NULLABLE_STRING = {"type": ["string", "null"]}
_USDC_OR_NULL = {**_NULLABLE_STRING, "description": "USDC; null: no such cap, or unknown."}
_CAP_ROOM: dict[str, Any] = {
    "cap": {"type": "string"},
    "limitUsdc": _USDC_OR_NULL,
    "spentUsdc": {"type": "string"},
    "remainingUsdc": _USDC_OR_NULL,
    "resetsAt": {
        **_NULLABLE_STRING,
        "description": "When the window starts afresh (UTC, ISO 8601).",
    },
}
_CAP_ROOM_REQUIRED = ["cap", "limitUsdc", "spentUsdc", "remainingUsdc", "resetsAt"]

STATUS_DOCUMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "What the wallet can still spend: the caps' room, approvals, balances.",
    "properties": {
        "walletAddress": _NULLABLE_STRING,
        "frozen": {
            "type": "boolean",
            "description": "true: the account holder froze spending; every payment is refused.",
        },
        "canSpendNowUsdc": {
            **_USDC_OR_NULL,
            "description": "The most one live payment may cost now: the least room of every cap.",
        },
        "caps": {
            "type": "array",
            "description": (
                "Each spend cap (perPayment, then each window: hourly when set, daily, monthly)"
                " and its room now."
            ),
            "items": {"type": "object", "required": _CAP_ROOM_REQUIRED, "properties": _CAP_ROOM},
        },
        "sellerBudgets": {
            "type": "object",
            "description": (
                "The allow rules with a budget of their own: a payment to a seller such a rule"
                " matches needs room under the rule's caps as well as the account's."
            ),
            "properties": {
                "total": {"type": "integer", "description": "How many rules carry a budget."},
                "budgets": {
                    "type": "array",
                    "description": "Each rule's daily and monthly cap that is set, and its room.",
                    "items": {
                        "type": "object",
                        "required": ["rule", *_CAP_ROOM_REQUIRED],
                        "properties": {
                            "rule": {"type": "string", "description": "host[/path], as allowed"},
                            **_CAP_ROOM,
                        },
                    },
                },
            },
        },
        "pendingApprovals": {
            "type": "object",
            "properties": {
                "total": {"type": "integer"},
                "sellers": {"type": "array", "items": {"type": "string"}},
            },
        },
        "seller": {
            "type": ["object", "null"],
            "description": "The seller asked about, and whether it waits for approval.",
            "properties": {
                "seller": {"type": "string"},
                "pendingApproval": {"type": "boolean"},
            },
        },
        "sandbox": {
            "type": "object",
            "description": "Test USDC on Base Sepolia (sandbox=true calls): never capped.",
            "properties": {
                "network": {"type": "string"},
                "balanceUsdc": _USDC_OR_NULL,
                "uncapped": {"type": "boolean"},
            },
        },
        "apiKeyExpiresAt": {
            **_NULLABLE_STRING,
            "description": "When the account's API key expires (UTC, ISO 8601).",
        },
        "asOf": {"type": "string"},
    },
    "required": [
        "caps",
        "sellerBudgets",
        "pendingApprovals",
        "sandbox",
        "frozen",
        "canSpendNowUsdc",
    ],
}


def capped_windows(caps: Caps, now: int) -> list[Window]:
    """The windows a live payment now is reserved in, shortest first: the hour's only when an
    hourly cap is set (no spend is kept for it otherwise), then the day's and the month's."""
    hour = [] if caps.hourly is None else [hour_window(now)]
    return [*hour, *windows_at(now)]


def canonical_seller(seller: str) -> str | None:
    """``host/path`` of a seller given as a URL or as ``host/path``; ``None`` when the source
    policy cannot judge it (such a seller is refused before it could wait for approval)."""
    text = seller.strip()
    url = text if "://" in text else f"https://{text}"
    try:
        location = seller_location(url)
    except ValueError:
        return None
    return f"{location.host}{location.path}"


def _budget_rooms(
    conn: Connection, account_id: str, budgets: list[tuple[Rule, SellerBudget]], now: int
) -> list[BudgetRoom]:
    if not budgets:
        return []
    day, month = windows_at(now)
    spent = policy_repo.seller_spend_of(conn, account_id, day, month)
    return [
        BudgetRoom(
            str(rule),
            CapRoom(window.name, limit, spent.get((rule, window.name), 0), window.resets_at),
        )
        for rule, budget in budgets
        for window in (day, month)
        if (limit := budget.limit_of(window.name)) is not None
    ]


class Budget:
    def __init__(self, db: Database, clock: Clock, sandbox_chain: SandboxChain | None) -> None:
        self.db = db
        self.clock = clock
        self.sandbox_chain = sandbox_chain

    def status(self, account_id: str, *, seller: str | None = None) -> WalletStatus:
        """``seller``: a URL or ``host/path``, reported as the policy names it (as given, cut
        short, when the policy cannot name it: never pending)."""
        now = self.clock.now()
        with self.db.read() as conn:
            if portal_repo.find_account(conn, account_id) is None:
                raise AccountNotFound("the account no longer exists")
            settings = policy_repo.load_settings(conn, account_id)
            caps = settings.caps
            rooms = [CapRoom("perPayment", caps.per_payment, 0, None)]
            for window in capped_windows(caps, now):
                spent = policy_repo.spent_in(conn, account_id, window)
                rooms.append(
                    CapRoom(window.name, caps.limit_of(window.name), spent, window.resets_at)
                )
            budgets = policy_repo.budgets_of(conn, account_id)
            seller_budgets = _budget_rooms(conn, account_id, budgets[:LISTED_BUDGETS], now)
            total = policy_repo.pending_count(conn, account_id)
            pending = policy_repo.pending_of(conn, account_id, limit=MAX_PENDING_SELLERS)
            address = portal_repo.wallet_address(conn, account_id)
            key = active_key(portal_repo.keys_of(conn, account_id), now)
        asked = canonical_seller(seller) if seller is not None else None
        named = asked if asked is not None or seller is None else seller[:MAX_SELLER_ECHO]
        return WalletStatus(
            wallet_address=address,
            frozen=settings.frozen,
            caps=rooms,
            seller_budgets=seller_budgets,
            budgeted_rules=len(budgets),
            pending_total=total,
            pending=pending[:LISTED_PENDING],
            seller=named,
            seller_pending=None
            if seller is None
            else any(f"{p.host}{p.path}" == asked for p in pending),
            sandbox_balance=self._balance(address),
            key_expires_at=None if key is None else key.expires_at,
            now=now,
        )

    def _balance(self, address: str | None) -> int | None:
        """``None`` when it cannot be read (no sandbox chain, the node away): the status says
        so rather than fail."""
        if self.sandbox_chain is None or address is None:
            return None
        try:
            return self.sandbox_chain.usdc_balance(parse_address(address))
        except (ChainError, ValueError) as exc:
            log.info("testnet_balance_unavailable", error=type(exc).__name__)
            return None
