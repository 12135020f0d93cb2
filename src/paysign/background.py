"""Work the server does on its own between requests: periodic reconciliation."""

from __future__ import annotations

import threading

import structlog

from paysign.bootstrap import Runtime
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.services.reconcile import reconcile

log = structlog.get_logger("paysign.background")


def start_reconciler(runtime: Runtime) -> threading.Event | None:
    """Reconcile every ``reconcile_interval_seconds`` while the server runs; set the returned
    event to stop. Nothing starts when no network has an RPC endpoint."""
    settings = runtime.settings
    if not settings.rpc_urls:
        return None
    stop = threading.Event()
    chain = RpcAuthorizationStates(settings.rpc_urls)

    def loop() -> None:
        while not stop.wait(settings.reconcile_interval_seconds):
            try:
                reconcile(
                    runtime.db, runtime.clock, chain, grace_seconds=settings.reconcile_grace_seconds
                )
            except Exception:  # keep reconciling next time; the server must not die of it
                log.exception("reconcile_failed")
        chain.close()

    threading.Thread(target=loop, name="paysign-reconciler", daemon=True).start()
    return stop
