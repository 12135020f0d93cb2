"""A helper process of the service's own, on two pipes the event loop reads.

Two helpers work beside the event loop: the signer (``custody.signer_process``) and the
flusher of SQLite's log (``store.wal_sync``). Each speaks its own wire over the child's stdin
and stdout, and each owner keeps what the child owes; what they share is here: starting the
child with none of the service's settings in its environment (no ``PAYSIGN_*``: no master key,
no database credentials), stopping it, a budget of restarts, and the watch that notices a child
that stopped answering.

    >>> budget = RestartBudget(max_restarts=1, window=60.0, given_up_event="helper_given_up")
    >>> budget.allow(), budget.allow()  # the first start and one restart
    (True, True)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import IO

import structlog

log = structlog.get_logger("paysign.helper")


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the pipe ``fd`` (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def helper_environment() -> dict[str, str]:
    """The service's environment less its settings: a helper needs none of them."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PAYSIGN_")}


class HelperChild:
    """One running helper, its stdout read by ``loop``."""

    def __init__(self, command: Sequence[str], loop: asyncio.AbstractEventLoop) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            env=helper_environment(),
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout_fd = self.process.stdout.fileno()
        self.loop = loop
        self.ready = False

    def write(self, data: bytes) -> None:
        write_all(self.stdin.fileno(), data)

    def stop(self, *, kill: bool) -> None:
        """End it: at once when it failed, or by closing its stdin (it exits at EOF)."""
        if not self.loop.is_closed():
            self.loop.remove_reader(self.stdout_fd)
        if kill:
            self.process.kill()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        try:
            self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class RestartBudget:
    """At most ``max_restarts`` starts after the first within ``window`` seconds; past that,
    ``given_up_event`` is logged once and the owner does the work itself."""

    def __init__(self, *, max_restarts: int, window: float, given_up_event: str) -> None:
        self._max_restarts = max_restarts
        self._window = window
        self._event = given_up_event
        self._starts: deque[float] = deque()
        self._gave_up = False

    def allow(self) -> bool:
        """Whether a start may be made now (and counts it)."""
        now = time.monotonic()
        while self._starts and now - self._starts[0] > self._window:
            self._starts.popleft()
        if len(self._starts) > self._max_restarts:
            if not self._gave_up:
                self._gave_up = True
                log.warning(self._event, restarts=self._max_restarts)
            return False
        self._gave_up = False
        self._starts.append(now)
        return True


class ProgressWatch:
    """Calls ``stalled(why)`` when a helper answers nothing for ``seconds`` while ``owed()``."""

    def __init__(
        self, seconds: float, owed: Callable[[], bool], stalled: Callable[[str], None]
    ) -> None:
        self.seconds = seconds
        self._owed = owed
        self._stalled = stalled
        self._answers = 0
        self._watching = False

    def answered(self) -> None:
        self._answers += 1

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Work was sent: check on it in ``seconds``, unless a check is due already."""
        if not self._watching:
            self._watching = True
            loop.call_later(self.seconds, self._check, loop, self._answers)

    def _check(self, loop: asyncio.AbstractEventLoop, answers_then: int) -> None:
        self._watching = False
        if not self._owed():
            return
        if self._answers == answers_then:
            self._stalled(f"it answered nothing for {self.seconds} s")
            return
        self.watch(loop)


__all__ = ["HelperChild", "ProgressWatch", "RestartBudget", "helper_environment", "write_all"]
