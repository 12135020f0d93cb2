"""Work the server does on its own between requests: periodic reconciliation and sending
notifications, each run by one process of the cluster at a time (the holder of the job's
lease, ``services.job_leases``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

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


class LeasedJob:
    """``job`` every ``interval`` seconds while this process holds the job's lease, which it
    renews every third of the lease's lifetime."""

    def __init__(
        self,
        lease: JobLease,
        interval: float,
        job: Callable[[], None],
        *,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.lease = lease
        self.interval = interval
        self.job = job
        self._on_stop = on_stop
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

    def _holds(self) -> bool:
        try:
            return self.lease.hold()
        except Exception:  # the database is away: not held; asked again next time
            log.exception("job_lease_failed", job=self.lease.name)
            return False

    def _run(self) -> None:
        try:
            self.job()
        except Exception:  # run again next time; the thread (and the lease's renewal) goes on
            log.exception("background_job_failed", job=self.lease.name)

    def _loop(self) -> None:
        renew_every = max(1.0, self.lease.ttl / 3)
        held = False
        due = time.monotonic() + self.interval
        while not self._stop.wait(min(renew_every, max(0.0, due - time.monotonic()))):
            now_held = self._holds()
            if now_held != held:
                log.info("job_lease_taken" if now_held else "job_lease_lost", job=self.lease.name)
                held = now_held
            if held and time.monotonic() >= due:
                self._run()
            if time.monotonic() >= due:
                due = time.monotonic() + self.interval
        if held:
            try:
                self.lease.release()
            except Exception:  # it expires on its own
                log.exception("job_lease_release_failed", job=self.lease.name)
        if self._on_stop is not None:
            self._on_stop()


def start_reconciler(runtime: Runtime) -> LeasedJob | None:
    """Reconcile every ``reconcile_interval_seconds`` in the lease holder; ``stop()`` the
    returned job. Nothing starts when no network has an RPC endpoint."""
    settings = runtime.settings
    if not settings.rpc_urls:
        return None
    chain = RpcAuthorizationStates(settings.rpc_urls)

    def run() -> None:
        try:
            reconcile(
                runtime.db, runtime.clock, chain, grace_seconds=settings.reconcile_grace_seconds
            )
        except Exception:  # keep reconciling next time; the server must not die of it
            log.exception("reconcile_failed")

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
