"""``paysign serve --workers N``: a supervisor process and N worker processes on one port.

The supervisor binds the listening socket once, accepts on it, and hands each connection to its
ready workers in turn (``handoff``). A worker is a fresh interpreter (``python -m
paysign.serving.worker``) given its end of a Unix socket to receive them on (``pass_fds``). Not
fork: the supervisor runs the dev chain's threads, and a forked child would inherit their locks
half-taken. Not SO_REUSEPORT with each worker binding: with one socket the kernel's queue of
pending connections outlives any one worker, so a worker that is killed or replaced leaves no
share of the queue to be refused, and a graceful restart needs no second bind.

- A worker that dies is started again, after 0.5 s doubling to 30 s while its successors keep
  dying young, so a crash loop does not spin.
- SIGHUP: a fresh set of workers is started; once every one of them is ready, connections go to
  them, and the old ones get SIGTERM and drain (uvicorn finishes their requests in flight).
  Should a new one die before it is ready, the old set stays.
- SIGTERM or SIGINT: every worker gets SIGTERM and drains; ``run`` returns 0 once all have
  exited, and the caller stops the dev chain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from types import FrameType

import structlog

from paysign.metrics import worker_exited
from paysign.serving.handoff import ConnectionHandoff, worker_channel
from paysign.serving.process import StopSignals

log = structlog.get_logger("paysign.supervisor")

#: A worker that lived shorter than this counts as a crash for the back-off.
SHORT_LIFE_SECONDS = 10.0
FIRST_RESTART_DELAY = 0.5
MAX_RESTART_DELAY = 30.0
TICK_SECONDS = 0.1
#: A worker is run as ``WORKER_COMMAND CHANNEL_FD READY_FD SUPERVISOR_PID``.
WORKER_COMMAND = (sys.executable, "-m", "paysign.serving.worker")


@dataclasses.dataclass(slots=True)
class Worker:
    slot: int
    generation: int
    process: subprocess.Popen[bytes]
    ready_fd: int
    #: The supervisor's end of the socket the worker's connections are handed over.
    channel: socket.socket
    started_at: float
    ready: bool = False
    retiring: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid


def restart_delay(failures: int) -> float:
    """How long to wait before starting a worker again after ``failures`` short lives in a
    row: 0.5 s, doubling, at most 30 s."""
    return float(min(FIRST_RESTART_DELAY * 2 ** (max(failures, 1) - 1), MAX_RESTART_DELAY))


@dataclasses.dataclass(slots=True)
class _Slot:
    failures: int = 0
    restart_at: float | None = None


class Supervisor:
    def __init__(
        self,
        workers: int,
        listener: socket.socket,
        env: dict[str, str],
        stop: StopSignals,
        *,
        command: tuple[str, ...] = WORKER_COMMAND,
    ) -> None:
        self.command = command
        self.count = workers
        self.listener = listener
        self.env = env
        self.stop = stop
        self.workers: list[Worker] = []
        self.generation = 0
        self.slots = [_Slot() for _ in range(workers)]
        self._reload_requested = False
        self._pending_generation: int | None = None
        self.handoff = ConnectionHandoff(listener)

    def run(self) -> int:
        previous = signal.signal(signal.SIGHUP, self._on_hangup)
        self.handoff.start()
        try:
            for slot in range(self.count):
                self._spawn(slot, self.generation)
            while not self.stop.requested:
                self._tick()
                time.sleep(TICK_SECONDS)
            self._stop_all()
        finally:
            self.handoff.stop()
            signal.signal(signal.SIGHUP, previous)
        return 0

    def _on_hangup(self, sig: int, frame: FrameType | None) -> None:
        self._reload_requested = True

    def _spawn(self, slot: int, generation: int) -> Worker:
        ready_read, ready_write = os.pipe()
        os.set_blocking(ready_read, False)
        ours, theirs = worker_channel()
        command = [*self.command, str(theirs.fileno()), str(ready_write), str(os.getpid())]
        try:
            process = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
                command, env=self.env, pass_fds=(theirs.fileno(), ready_write)
            )
        except BaseException:
            ours.close()
            os.close(ready_read)
            raise
        finally:
            os.close(ready_write)
            theirs.close()
        worker = Worker(slot, generation, process, ready_read, ours, time.monotonic())
        self.workers.append(worker)
        log.info("worker_started", pid=process.pid, slot=slot, generation=generation)
        return worker

    def _tick(self) -> None:
        for worker in self.workers:
            self._check_ready(worker)
        for worker in [w for w in self.workers if w.process.poll() is not None]:
            self._reap(worker)
        if self._reload_requested and self._pending_generation is None:
            self._reload_requested = False
            self._pending_generation = self.generation + 1
            log.info("graceful_restart", generation=self._pending_generation)
            for slot in range(self.count):
                self._spawn(slot, self._pending_generation)
        self._finish_reload()
        now = time.monotonic()
        for slot, state in enumerate(self.slots):
            if state.restart_at is not None and now >= state.restart_at:
                state.restart_at = None
                self._spawn(slot, self.generation)

    def _check_ready(self, worker: Worker) -> None:
        if worker.ready:
            return
        with contextlib.suppress(BlockingIOError):
            if os.read(worker.ready_fd, 1):
                worker.ready = True
                self._route()
                log.info("worker_ready", pid=worker.pid, generation=worker.generation)

    def _route(self) -> None:
        """Connections to the ready workers of the current generation, none to a retiring one."""
        self.handoff.route_to(
            [
                w.channel
                for w in self.workers
                if w.ready and not w.retiring and w.generation == self.generation
            ]
        )

    def _reap(self, worker: Worker) -> None:
        self.workers.remove(worker)
        self._route()
        worker.channel.close()
        os.close(worker.ready_fd)
        worker_exited(worker.pid)
        status = worker.process.returncode
        if worker.retiring or self.stop.requested:
            log.info("worker_stopped", pid=worker.pid, status=status)
            return
        if worker.generation == self._pending_generation:
            log.error("graceful_restart_failed", pid=worker.pid, status=status)
            self._abandon_reload()
            return
        if worker.generation != self.generation:
            return
        state = self.slots[worker.slot]
        lived = time.monotonic() - worker.started_at
        state.failures = state.failures + 1 if lived < SHORT_LIFE_SECONDS else 1
        delay = restart_delay(state.failures)
        state.restart_at = time.monotonic() + delay
        log.warning("worker_died", pid=worker.pid, status=status, restart_in_seconds=delay)

    def _finish_reload(self) -> None:
        pending = self._pending_generation
        if pending is None:
            return
        new = [w for w in self.workers if w.generation == pending]
        if len(new) < self.count or not all(w.ready for w in new):
            return
        self.generation = pending
        self._pending_generation = None
        self._route()  # the new workers take the connections before the old ones stop
        for worker in self.workers:
            if worker.generation != pending:
                self._retire(worker)
        for state in self.slots:
            state.failures, state.restart_at = 0, None
        log.info("graceful_restart_done", generation=pending)

    def _abandon_reload(self) -> None:
        pending, self._pending_generation = self._pending_generation, None
        for worker in self.workers:
            if worker.generation == pending:
                self._retire(worker)

    def _retire(self, worker: Worker) -> None:
        worker.retiring = True
        self._route()  # before the signal: a draining worker takes no new connection
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(signal.SIGTERM)

    def _stop_all(self) -> None:
        self.handoff.stop()
        for worker in self.workers:
            self._retire(worker)
        while self.workers:
            for worker in [w for w in self.workers if w.process.poll() is not None]:
                self._reap(worker)
            time.sleep(TICK_SECONDS)
        log.info("workers_stopped")
