"""Time as a dependency: use cases ask a clock, tests hand them a frozen one."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> int:
        """Unix time in whole seconds (UTC)."""
        ...


class SystemClock:
    def now(self) -> int:
        return int(time.time())
