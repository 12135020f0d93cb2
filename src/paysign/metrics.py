"""The service's Prometheus metrics: the metric objects, the hooks the code calls, the scrape.

The hot paths call one small function each (``signature_made``, ``observe_batch``...); a
labelled child is looked up once and kept, since ``labels(...)`` costs three times the
increment itself. This module is a leaf any layer may import: it knows nothing of HTTP.

One process: ``scrape()`` renders the default registry (with the process and GC metrics).
Several (``PROMETHEUS_MULTIPROC_DIR`` set before ``prometheus_client`` is imported, as the
``serve --workers`` supervisor does): every process writes its values to files in that
directory and ``scrape()`` adds up all of them, whichever worker answers. Only counters,
histograms and gauges written through ``prometheus_client`` aggregate that way, so every
metric here is one of those; nothing is read from a live object at scrape time except the
reconcile lag, which is computed from the aggregated timestamp.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

#: The signing endpoint answers in about 0.2 ms unloaded and should never take a second.
SIGNING_SECONDS_BUCKETS = (
    0.0002,
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
)
#: Group commit takes at most ``store.group_commit.MAX_BATCH`` (64) requests per transaction.
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
#: A free connection is handed out in microseconds; a wait ends after 5 s at most.
POOL_WAIT_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)

SIGNATURES = Counter(
    "paysign_signatures",
    "Payments signed and answered, by network (CAIP-2) and sandbox (true/false).",
    ["network", "sandbox"],
)
REFUSALS = Counter(
    "paysign_signing_refusals",
    "4xx answers of POST /wallets/signatures, by problem type slug "
    "('unauthorized' for the 401, which is not a problem document).",
    ["problem"],
)
SIGNING_SECONDS = Histogram(
    "paysign_signing_seconds",
    "Time POST /wallets/signatures took in the server, from the request to its answer.",
    buckets=SIGNING_SECONDS_BUCKETS,
)
BATCH_SIZE = Histogram(
    "paysign_group_commit_batch_size",
    "Signing requests sharing one database transaction (group commit).",
    buckets=BATCH_SIZE_BUCKETS,
)
BATCH_PATHS = Counter(
    "paysign_group_commit_batches",
    "PostgreSQL signing batches by how they ran: 'read_ahead' (on the event loop, their reads "
    "made before they ran), 'threads' (a read not made ahead, or a fault: run again on the "
    "store's threads).",
    ["path"],
)
KNOWN_PAYER_BATCHES = Counter(
    "paysign_known_payer_batches",
    "PostgreSQL signing batches run on what earlier batches read of their payers: "
    "'one_round_trip' (committed so), 'changed' (a payer's holder, rules or windows had "
    "changed, or a cap refused: run again on locked reads).",
    ["outcome"],
)
SIGNER_FALLBACKS = Counter(
    "paysign_signer_fallbacks",
    "Payments signed by the serving process instead of the signer child: 'not_sent' (a lone "
    "request, or no child ready), 'unanswered' (sent, but the child died, stalled or refused).",
    ["reason"],
)
POOL_WAIT_SECONDS = Histogram(
    "paysign_db_pool_wait_seconds",
    "Time a signing transaction waited for a PostgreSQL connection from the pool.",
    buckets=POOL_WAIT_BUCKETS,
)
POOL_TIMEOUTS = Counter(
    "paysign_db_pool_timeouts",
    "Signing transactions that got no PostgreSQL connection from the pool in time.",
)
RECONCILE_LAST_SUCCESS_NAME = "paysign_reconcile_last_success_timestamp_seconds"
RECONCILE_LAST_SUCCESS = Gauge(
    RECONCILE_LAST_SUCCESS_NAME,
    "Unix time the last reconcile pass finished without interruption (0: none yet).",
    multiprocess_mode="max",
)
TREASURY_BALANCE = Gauge(
    "paysign_treasury_balance_base_units",
    "The sandbox treasury's USDC balance in base units, read after each test-funds grant.",
    ["network"],
    multiprocess_mode="mostrecent",
)
RECONCILE_LAG = "paysign_reconcile_lag_seconds"
RECONCILE_LAG_HELP = (
    "Seconds since the last reconcile pass finished without interruption (absent until one has)."
)


# --- the hooks ---

_signatures: dict[tuple[str, bool], Counter] = {}
_refusals: dict[str, Counter] = {}
_fallbacks = {
    sent: SIGNER_FALLBACKS.labels("unanswered" if sent else "not_sent") for sent in (True, False)
}


def signature_made(network: str, sandbox: bool) -> None:
    child = _signatures.get((network, sandbox))
    if child is None:
        child = SIGNATURES.labels(network, "true" if sandbox else "false")
        _signatures[(network, sandbox)] = child
    child.inc()


def signing_refused(problem: str) -> None:
    child = _refusals.get(problem)
    if child is None:
        child = _refusals[problem] = REFUSALS.labels(problem)
    child.inc()


def observe_signing(seconds: float) -> None:
    SIGNING_SECONDS.observe(seconds)


def observe_batch(size: int) -> None:
    BATCH_SIZE.observe(size)


def batch_ran(path: str) -> None:
    BATCH_PATHS.labels(path).inc()


def known_payer_batch(outcome: str) -> None:
    KNOWN_PAYER_BATCHES.labels(outcome).inc()


def signer_fell_back(*, sent_to_child: bool) -> None:
    _fallbacks[sent_to_child].inc()


def observe_pool_wait(seconds: float) -> None:
    POOL_WAIT_SECONDS.observe(seconds)


def pool_timed_out() -> None:
    POOL_TIMEOUTS.inc()


def reconcile_succeeded() -> None:
    RECONCILE_LAST_SUCCESS.set(time.time())


def treasury_balance(network: str, base_units: int) -> None:
    TREASURY_BALANCE.labels(network).set(base_units)


# --- processes and the scrape ---


def multiprocess_dir() -> str | None:
    """The directory every worker writes its values to, when there are several."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def worker_exited(pid: int) -> None:
    """Called by the supervisor when worker ``pid`` exits: its live-only gauges are dropped
    (its counters and histograms keep counting in the sums)."""
    if multiprocess_dir() is not None:
        mark_process_dead(pid)  # type: ignore[no-untyped-call]


class _WithReconcileLag(Collector):
    """The source's metrics, and the reconcile lag computed from them now."""

    def __init__(self, source: Collector) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        return self._with_lag()

    def _with_lag(self) -> Iterator[Metric]:
        last = 0.0
        for family in self._source.collect():
            if family.name == RECONCILE_LAST_SUCCESS_NAME:
                last = max((sample.value for sample in family.samples), default=0.0)
            yield family
        if last > 0:
            yield GaugeMetricFamily(RECONCILE_LAG, RECONCILE_LAG_HELP, value=time.time() - last)


_scraped: CollectorRegistry | None = None
_scraped_lock = threading.Lock()


def _scrape_registry() -> CollectorRegistry:
    global _scraped
    with _scraped_lock:
        if _scraped is None:
            directory = multiprocess_dir()
            source: Collector = REGISTRY
            if directory is not None:
                source = MultiProcessCollector(None, path=directory)  # type: ignore[no-untyped-call]
            _scraped = CollectorRegistry(auto_describe=False)
            _scraped.register(_WithReconcileLag(source))
        return _scraped


def scrape() -> tuple[bytes, str]:
    """The exposition (Prometheus text format) and its content type."""
    return generate_latest(_scrape_registry()), CONTENT_TYPE_LATEST


__all__ = [
    "batch_ran",
    "known_payer_batch",
    "multiprocess_dir",
    "observe_batch",
    "observe_pool_wait",
    "observe_signing",
    "pool_timed_out",
    "reconcile_succeeded",
    "scrape",
    "signature_made",
    "signer_fell_back",
    "signing_refused",
    "treasury_balance",
    "worker_exited",
]
