"""The spend a signing transaction reserves, as it keeps it in memory (the account's day and
month windows, its hour's under an hourly cap, an allow rule's budget windows) and as it
writes it before the commit (the totals, each added by one update the database guards)."""

from __future__ import annotations

from dataclasses import dataclass

from paysign.policy.caps import Caps, Window
from paysign.policy.rules import Rule
from paysign.policy.seller_budgets import SellerBudget


@dataclass(frozen=True, slots=True)
class CapHit:
    """The window that refused a reservation, and what it had spent at that moment; ``rule``
    names the allow rule when the window is that rule's budget."""

    window: Window
    limit: int
    spent: int
    rule: Rule | None = None


@dataclass(frozen=True, slots=True)
class SpendTotal:
    """What a transaction adds to one account's day and month windows."""

    account_id: str
    day: Window
    month: Window
    caps: Caps
    amount: int


@dataclass(frozen=True, slots=True)
class HourTotal:
    """What a transaction adds to one account's hourly window."""

    account_id: str
    hour: Window
    cap: int
    amount: int


@dataclass(frozen=True, slots=True)
class SellerTotal:
    """What a transaction adds to one allow rule's budget windows."""

    account_id: str
    rule: Rule
    day: Window
    month: Window
    budget: SellerBudget
    amount: int


class AccountWindows:
    """One account's day and month windows inside a transaction: what they have spent, with
    what this transaction added; ``stored`` of that is in the database already."""

    __slots__ = ("added", "caps", "day", "day_spent", "month", "month_spent", "stored")

    def __init__(self, day: Window, month: Window, spent: tuple[int, int]) -> None:
        self.day, self.month = day, month
        self.day_spent, self.month_spent = spent
        self.caps: Caps | None = None
        self.added = self.stored = 0

    def add(self, amount: int, caps: Caps) -> None:
        self.day_spent += amount
        self.month_spent += amount
        self.added += amount
        self.caps = caps  # the holder's, read once per transaction: the same for each request


class HourWindow:
    """One account's hourly window inside a transaction: what it has spent, with what this
    transaction added (none of which is in the database yet)."""

    __slots__ = ("added", "cap", "spent")

    def __init__(self, spent: int) -> None:
        self.spent = spent
        self.added = 0
        self.cap: int | None = None


class SellerWindows:
    """One allow rule's budget windows inside a transaction: what they have spent, with what
    this transaction added (none of which is in the database yet)."""

    __slots__ = ("added", "budget", "day_spent", "month_spent")

    def __init__(self, spent: tuple[int, int], budget: SellerBudget) -> None:
        self.day_spent, self.month_spent = spent
        self.budget = budget
        self.added = 0
