"""Work the server does on its own between requests: periodic reconciliation (payments and
withdrawals) and sending notifications, each run by one process of the cluster at a time (the
holder of the job's lease, ``services.job_leases``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from paysign.bootstrap import Runtime
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.connector.outbound import Outbound, OutboundLimits, OutboundRefused
from paysign.services.job_leases import JobLease
from paysign.services.notification_delivery import (
    WEBHOOK_MAX_RESPONSE_BYTES,
    WEBHOOK_TIMEOUT_SECONDS,
    Notifier,
    PostWebhook,
    SmtpSettings,
    WebhookUnreachable,
)
from paysign.services.reconcile import reconcile
from paysign.services.withdrawal_reconcile import reconcile_withdrawals

log = structlog.get_logger("paysign.background")

RECONCILE_JOB = "reconcile"
NOTIFY_JOB = "notify"


def start_background_jobs(runtime: Runtime) -> Callable[[], None]:
    """Start every periodic job; call the returned function to stop them (it waits for a run
    in progress and gives the leases up)."""
    jobs = [job for job in (start_reconciler(runtime), start_notifier(runtime)) if job]

    def stop() -> None:
        for job in jobs:
            job.stop()

    return stop


@dataclass(frozen=True, slots=True)
class LeaseSchedule:
    """When a leased job's loop asks for its lease and when it wakes: the lease is written
    (renewed, or tried when not held) once every ``renew_every`` seconds, however often the
    job runs; a holder also wakes when the job is due.

    >>> schedule = LeaseSchedule(renew_every=10.0)
    >>> schedule.lease_due(now=105.0, asked_at=100.0), schedule.lease_due(110.0, 100.0)
    (False, True)
    >>> schedule.sleep_for(now=105.0, asked_at=100.0, run_due=107.0)  # a holder: the job is next
    2.0
    >>> schedule.sleep_for(now=105.0, asked_at=100.0, run_due=None)  # not held: only the lease
    5.0
    """

    renew_every: float

    @classmethod
    def for_ttl(cls, ttl: int) -> LeaseSchedule:
        """A third of the lease's lifetime: a holder renews twice before it could expire."""
        return cls(max(1.0, ttl / 3))

    def lease_due(self, now: float, asked_at: float | None) -> bool:
        """Whether to write the lease now; ``asked_at`` is when it was last asked for (taken,
        renewed or refused), None before the first time."""
        return asked_at is None or now - asked_at >= self.renew_every

    def sleep_for(self, now: float, asked_at: float | None, run_due: float | None) -> float:
        """Seconds until the next wake: the next lease write, or the next run if sooner
        (``run_due`` is None when the lease is not held: nothing to run)."""
        wake = now if asked_at is None else asked_at + self.renew_every
        if run_due is not None:
            wake = min(wake, run_due)
        return max(0.0, wake - now)


class LeasedJob:
    """``job`` every ``interval`` seconds while this process holds the job's lease. The lease
    is written once every third of its lifetime (``LeaseSchedule``), not on every run; it is
    renewed before a run when that third has passed, and during a run that lasts longer, so a
    slow run does not lose it."""

    def __init__(
        self,
        lease: JobLease,
        interval: float,
        job: Callable[[], None],
        *,
        on_stop: Callable[[], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lease = lease
        self.interval = interval
        self.job = job
        self.schedule = LeaseSchedule.for_ttl(lease.ttl)
        self.held = False
        self._on_stop = on_stop
        self._monotonic = monotonic
        self._asked_at: float | None = None
        self._run_due = monotonic() + interval
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"paysign-{lease.name}", daemon=True
        )

    def start(self) -> LeasedJob:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def step(self) -> float:
        """One wake of the loop: write the lease if due, run the job if due and held; the
        seconds until the next wake."""
        self._ask_for_lease_if_due()
        if self._monotonic() >= self._run_due:
            if self.held:
                self._run()
            self._run_due = self._monotonic() + self.interval
        return self.schedule.sleep_for(
            self._monotonic(), self._asked_at, self._run_due if self.held else None
        )

    def _ask_for_lease_if_due(self) -> None:
        now = self._monotonic()
        if not self.schedule.lease_due(now, self._asked_at):
            return
        self._asked_at = now
        held = self._holds()
        if held != self.held:
            log.info("job_lease_taken" if held else "job_lease_lost", job=self.lease.name)
            self.held = held

    def _holds(self) -> bool:
        try:
            return self.lease.hold()
        except Exception:  # the database is away: not held; asked again next time
            log.exception("job_lease_failed", job=self.lease.name)
            return False

    def _run(self) -> None:
        finished = threading.Event()
        keeper = threading.Thread(
            target=self._keep_lease_until,
            args=(finished,),
            name=f"paysign-{self.lease.name}-lease",
            daemon=True,
        )
        keeper.start()
        try:
            self.job()
        except Exception:  # run again next time; the thread (and the lease's renewal) goes on
            log.exception("background_job_failed", job=self.lease.name)
        finally:
            finished.set()
            keeper.join()

    def _keep_lease_until(self, finished: threading.Event) -> None:
        """Renew the lease on schedule while a run goes on (the loop is busy running it)."""
        while not finished.wait(
            self.schedule.sleep_for(self._monotonic(), self._asked_at, run_due=None)
        ):
            self._ask_for_lease_if_due()

    def _loop(self) -> None:
        while not self._stop.wait(self.step()):
            pass
        if self.held:
            try:
                self.lease.release()
            except Exception:  # it expires on its own
                log.exception("job_lease_release_failed", job=self.lease.name)
        if self._on_stop is not None:
            self._on_stop()


def start_reconciler(runtime: Runtime) -> LeasedJob | None:
    """Reconcile payments and withdrawals every ``reconcile_interval_seconds`` in the lease
    holder; ``stop()`` the returned job. Nothing starts when no network has an RPC endpoint."""
    settings = runtime.settings
    if not settings.rpc_urls:
        return None
    chain = RpcAuthorizationStates(settings.rpc_urls)

    grace = settings.reconcile_grace_seconds

    def run() -> None:
        # Each on its own: payments failing to reconcile must not hold withdrawals back.
        try:
            reconcile(runtime.db, runtime.clock, chain, grace_seconds=grace)
        except Exception:  # keep reconciling next time; the server must not die of it
            log.exception("reconcile_failed")
        try:
            reconcile_withdrawals(
                runtime.db, runtime.clock, chain, runtime.registry, grace_seconds=grace
            )
        except Exception:
            log.exception("withdrawal_reconcile_failed")

    lease = JobLease(runtime.db, runtime.clock, RECONCILE_JOB, ttl=settings.job_lease_seconds)
    return LeasedJob(lease, settings.reconcile_interval_seconds, run, on_stop=chain.close).start()


def start_notifier(runtime: Runtime) -> LeasedJob:
    """Send the notification outbox every ``notification_interval_seconds`` in the lease
    holder; ``stop()`` the returned job."""
    settings = runtime.settings
    smtp = None
    if settings.smtp_url:
        smtp = SmtpSettings(settings.smtp_url, settings.smtp_from)
    notifier = Notifier(
        runtime.db,
        runtime.vault,
        runtime.clock,
        post_webhook=guarded_webhook_poster(allow_private=settings.connector_allow_private),
        smtp=smtp,
    )
    lease = JobLease(runtime.db, runtime.clock, NOTIFY_JOB, ttl=settings.job_lease_seconds)

    def run() -> None:
        notifier.run_once()

    return LeasedJob(lease, settings.notification_interval_seconds, run).start()


def guarded_webhook_poster(*, allow_private: bool) -> PostWebhook:
    """Webhooks go out through the connector's outbound client: its address guard keeps a
    holder from pointing one at the server's own network, and no redirect is followed."""
    outbound = Outbound(
        OutboundLimits(
            allow_private=allow_private,
            max_response_bytes=WEBHOOK_MAX_RESPONSE_BYTES,
            timeout_seconds=WEBHOOK_TIMEOUT_SECONDS,
            max_redirects=0,
        )
    )

    async def post(url: str, headers: dict[str, str], body: bytes) -> int:
        try:
            response = await outbound.request("POST", url, headers=headers, content=body)
        except OutboundRefused as refused:
            raise WebhookUnreachable(refused.detail) from None
        return response.status

    return post
