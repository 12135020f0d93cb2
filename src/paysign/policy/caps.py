"""Spend caps: per payment, per UTC hour, per UTC day, per UTC calendar month, in USDC base
units.

The arithmetic lives here; the reservation itself is a guarded update in the database, so
concurrent payments can never sum past a cap.

    >>> day = day_window(1_790_000_000)
    >>> day.name, day.start, day.resets_at - day.start
    ('daily', 1789948800, 86400)
    >>> month_window(1_790_000_000).start   # 2026-09-01T00:00:00Z
    1788220800
    >>> hour_window(1_790_000_000)
    Window(name='hourly', start=1789999200, resets_at=1790002800)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

USDC = 1_000_000
HOUR = 3_600
DAY = 86_400


#: The most a spend window counts (the ledger's signed 64-bit integer). A window without a cap
#: is held to it, so no total overflows: past it a payment is refused as past a cap.
LEDGER_MAX = 2**63 - 1


def ceiling(limit: int | None) -> int:
    """The most a window with the cap ``limit`` (``None``: no cap) may count.

    >>> ceiling(None) == LEDGER_MAX, ceiling(10)
    (True, 10)
    """
    return LEDGER_MAX if limit is None else limit


@dataclass(frozen=True, slots=True)
class Caps:
    per_payment: int | None
    daily: int | None
    monthly: int | None
    #: Off unless set: the window for the fast loops a misbehaving agent makes.
    hourly: int | None = None

    @classmethod
    def defaults(cls) -> Caps:
        return cls(per_payment=1 * USDC, daily=10 * USDC, monthly=100 * USDC)

    def limit_of(self, window: str) -> int | None:
        return {"hourly": self.hourly, "daily": self.daily, "monthly": self.monthly}[window]


@dataclass(frozen=True, slots=True)
class Window:
    name: str  # "hourly", "daily" or "monthly"
    start: int  # Unix seconds, inclusive
    resets_at: int  # Unix seconds, exclusive end


def hour_window(now: int) -> Window:
    start = now - now % HOUR
    return Window("hourly", start, start + HOUR)


def day_window(now: int) -> Window:
    start = now - now % DAY
    return Window("daily", start, start + DAY)


def month_window(now: int) -> Window:
    moment = datetime.fromtimestamp(now, tz=UTC)
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return Window("monthly", int(start.timestamp()), int(following.timestamp()))


def windows_at(now: int) -> tuple[Window, Window]:
    """The day and month windows ``now`` falls in (every payment asks: worked out once a day)."""
    return _windows_of_day(now - now % DAY)


@lru_cache(maxsize=8)
def _windows_of_day(day_start: int) -> tuple[Window, Window]:
    return day_window(day_start), month_window(day_start)


def iso(unix_seconds: int) -> str:
    return datetime.fromtimestamp(unix_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
