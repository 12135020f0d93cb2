"""Signatures made in a child process, so that the event loop's core never spends on secp256k1.

A signature costs ~25 µs of libsecp256k1: under load, more than a quarter of what the event
loop spent on a request when it signed them itself (88 µs, `bench/sign.py --inline-signing`).
Under load the requests of a batch (``store.group_commit``) are recorded in one transaction
on the event loop; this sends their digests to a signer process (``signer_worker``) as the
batch runs, in chunks, so the signatures are made on the other core while the loop records
the rest of the batch and commits. A thread could not do this: the loop would have to hand
it the GIL for every signature.

    signer = SignerProcess()
    deps = SigningDeps(..., wallet_signer=signer.wallet_signer)  # the wallets' keys: ChildSigner
    queue = SigningQueue(deps, completion=signer)  # ran / committed are its group-commit hooks
    ...
    signer.close()

Nothing here changes what is answered, only where the signature is made:

* a lone request (a batch of one payment) is signed on the loop, as before: its latency does
  not wait for a pipe;
* only a payment whose signer is a ``ChildSigner`` (a custodial wallet's key, opened by this
  service) goes to the child; its signature waits in that signer until the payment is answered;
* a payment whose signature does not come back (the process died, stalled, refused the key,
  or is not started yet) is signed on the loop when answered (``PreparedPayment.signed()``);
* a process that died is started again, at most ``max_restarts`` times per
  ``restart_window`` seconds; past that everything is signed on the loop (and logged).

Keys cross a pipe between the service and its own child, never a file; the child keeps none,
and its environment holds none of the service's settings (no ``PAYSIGN_*``: no master key).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import deque
from collections.abc import Callable, Sequence

import structlog

from paysign.custody.child_signer import ChildSigner
from paysign.custody.signer_worker import JOB_BYTES, READY, REFUSED, SIGNATURE_BYTES
from paysign.helper_process import HelperChild, ProgressWatch, RestartBudget
from paysign.protocol import PreparedPayment

log = structlog.get_logger("paysign.signer")

WORKER_COMMAND = (sys.executable, "-m", "paysign.custody.signer_worker")
#: Jobs sent at once while a batch runs: early enough to overlap, few enough writes.
CHUNK = 8
#: At most this many jobs in the pipe: their bytes (and the answers') stay well under a
#: pipe's 64 KiB, so a write never blocks the event loop.
MAX_IN_FLIGHT = 512


class _Waiter:
    """A committed batch waiting for its signatures."""

    __slots__ = ("deliver", "remaining")

    def __init__(self, remaining: int, deliver: Callable[[], None]) -> None:
        self.remaining = remaining
        self.deliver = deliver

    def one_done(self) -> None:
        self.remaining -= 1
        if self.remaining == 0:
            self.deliver()


class SignerProcess:
    """``group_commit.Completion`` that has payments signed by a child process."""

    def __init__(
        self,
        *,
        command: Sequence[str] = WORKER_COMMAND,
        chunk: int = CHUNK,
        max_in_flight: int = MAX_IN_FLIGHT,
        stall_seconds: float = 2.0,
        max_restarts: int = 3,
        restart_window: float = 60.0,
    ) -> None:
        self._command = tuple(command)
        self._chunk = chunk
        self._max_in_flight = max_in_flight
        self._restarts = RestartBudget(
            max_restarts=max_restarts,
            window=restart_window,
            given_up_event="signer_process_given_up",
        )
        self._progress = ProgressWatch(stall_seconds, self._owed, self._fail)
        self._child: HelperChild | None = None
        self._buffer = b""  # the start of a signature not read whole yet
        self._unsent: list[PreparedPayment] = []
        self._in_flight: deque[PreparedPayment] = deque()
        self._waiters: dict[int, _Waiter | None] = {}  # id(payment) -> its batch, once committed
        self._closed = False
        #: Payments signed by the child, and children started (what tests watch).
        self.signed_by_child = 0
        self.started = 0

    @property
    def ready(self) -> bool:
        """A child is running and has said it can sign."""
        return self._child is not None and self._child.ready

    @property
    def pid(self) -> int | None:
        return self._child.process.pid if self._child is not None else None

    def wallet_signer(self, private_key: bytes, address: bytes) -> ChildSigner:
        """The signer for a custodial wallet whose payments this process may sign."""
        return ChildSigner(private_key, address)

    # --- group_commit.Completion ---

    def ran(self, outcome: object) -> None:
        """A work of the running batch returned: queue its payment, send a full chunk."""
        if not isinstance(outcome, PreparedPayment) or not _offloadable(outcome):
            return
        self._unsent.append(outcome)
        if len(self._unsent) >= self._chunk and self._available():
            self._send(self._unsent)
            self._unsent = []

    def committed(self, outcomes: Sequence[object], deliver: Callable[[], None]) -> None:
        """The batch is committed: ``deliver`` once its payments are signed (or at once)."""
        self._unsent = []  # a rolled-back batch's payments are nobody's any more
        offloadable = [o for o in outcomes if isinstance(o, PreparedPayment) and _offloadable(o)]
        payments = [p for p in offloadable if _unsigned(p)]
        unsent = [p for p in payments if id(p) not in self._waiters]
        # A lone request's payment, not the last one of a batch whose others are signed.
        lone = len(offloadable) == 1 and unsent
        if not payments or lone or not self._available():
            deliver()  # each payment not signed yet is signed on the loop when answered
            return
        self._send(unsent)
        waiting = [p for p in payments if id(p) in self._waiters]
        if not waiting:
            deliver()
            return
        waiter = _Waiter(len(waiting), deliver)
        for payment in waiting:
            self._waiters[id(payment)] = waiter

    # --- the child ---

    def _available(self) -> bool:
        """A child is ready to sign for this loop; starts one when there is none."""
        if self._closed:
            return False
        loop = asyncio.get_running_loop()
        child = self._child
        if child is not None and child.loop is not loop:  # a new loop (tests): start afresh
            self._fail("the event loop changed")
            child = None
        if child is None:
            self._start(loop)
            return False  # it is still importing; this batch is signed on the loop
        return child.ready

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._restarts.allow():
            return
        try:
            child = HelperChild(self._command, loop)
        except OSError as exc:
            log.warning("signer_process_not_started", error=type(exc).__name__)
            return
        loop.add_reader(child.stdout_fd, self._on_readable)
        self._child, self._buffer = child, b""
        self.started += 1

    def _send(self, payments: list[PreparedPayment]) -> None:
        child = self._child
        room = self._max_in_flight - len(self._in_flight)
        if child is None or not child.ready or room <= 0 or not payments:
            return
        batch = payments[:room]
        jobs = b"".join(_job(p) for p in batch)
        try:
            child.write(jobs)
        except OSError:
            self._fail("the pipe to it broke")
            return
        self._in_flight.extend(batch)
        for payment in batch:
            self._waiters[id(payment)] = None
        self._progress.watch(child.loop)

    def _on_readable(self) -> None:
        child = self._child
        if child is None:
            return
        try:
            data = os.read(child.stdout_fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            self._fail("it exited")
            return
        if not child.ready:
            if data[:1] != READY:
                self._fail("it did not start")
                return
            child.ready, data = True, data[1:]
        buffer = self._buffer + data
        whole = len(buffer) - len(buffer) % SIGNATURE_BYTES
        self._buffer = buffer[whole:]
        for at in range(0, whole, SIGNATURE_BYTES):
            self._answered(buffer[at : at + SIGNATURE_BYTES])

    def _answered(self, signature: bytes) -> None:
        payment = self._in_flight.popleft()
        self._progress.answered()
        if signature != REFUSED:
            signer = payment.signer
            assert isinstance(signer, ChildSigner)
            signer.made_ahead(payment.digest, signature)
            self.signed_by_child += 1
        waiter = self._waiters.pop(id(payment))
        if waiter is not None:
            waiter.one_done()

    def _owed(self) -> bool:
        return bool(self._in_flight) and self._child is not None

    def _fail(self, why: str, *, closing: bool = False) -> None:
        """Stop the child; what it still owed is signed on the loop, and delivered now."""
        child, self._child = self._child, None
        if child is not None:
            if not closing:
                log.warning("signer_process_lost", reason=why, owed=len(self._in_flight))
            child.stop(kill=not closing)
        owed, self._in_flight = self._in_flight, deque()
        waiters = [self._waiters.pop(id(p)) for p in owed]
        for waiter in waiters:
            if waiter is not None:
                waiter.one_done()

    def close(self) -> None:
        self._closed = True
        self._fail("the service is stopping", closing=True)


def _unsigned(payment: PreparedPayment) -> bool:
    """For the child, and not signed by it yet."""
    signer = payment.signer
    return type(signer) is ChildSigner and not signer.has_signed(payment.digest)


def _offloadable(payment: PreparedPayment) -> bool:
    # Only a custodial wallet's own key goes to the child; any other signer (an HSM, a test
    # key object) signs where it is.
    return type(payment.signer) is ChildSigner


def _job(payment: PreparedPayment) -> bytes:
    signer = payment.signer
    assert isinstance(signer, ChildSigner)
    job = signer.job_for(payment.digest)
    assert len(job) == JOB_BYTES
    return job


__all__ = ["CHUNK", "MAX_IN_FLIGHT", "SignerProcess"]
