"""Group commit: the signing transactions that queue up while one is running share the next one.

A signing request is a piece of *work* run inside a store transaction. Under load, dozens
arrive together; each paying for its own BEGIN/COMMIT (a WAL write, an fsync on PostgreSQL)
and, on one busy account, waiting for the previous request's row lock until its commit, is
what limits throughput. Here the work queued while a batch is in flight runs as the next batch:
one after the other in one transaction, so each still sees the effects of the ones before
(a cap reservation never sums past a cap), then one commit, then every answer.

Isolation between requests: a work never raises for an expected outcome (a refusal is a
value it returns, recorded in the transaction); anything it *raises* is unexpected. Then the
whole batch is rolled back and each work is run again alone, in its own transaction, so one
request's failure can never change another's outcome (at worst, the others sign again with a
fresh nonce: nothing from the rolled-back batch was ever answered). The same happens when the
commit itself fails, and to a batch of one: a connection the server closed while it sat idle
costs a retry on a fresh one, not an error.

In-process SQLite runs a batch on the event loop (``store.inline``) at the end of the loop
iteration in which its requests arrived, and has its commit flushed to the disk beside the loop
(``store.log_sync``) while the next batch runs: its answers wait for that flush. Other stores
run up to ``max_inflight`` batches on the store's own threads, and a request that finds a free
slot starts one at once (no added wait).
A batch whose every work says what it reads first (``first_read``) goes to the store's
``prefetching`` instead, when it has one: on the event loop, awaiting the database's answers
(PostgreSQL); if that fails for any reason, nothing of it is answered and it runs on the
threads as it would have.
One at a time by default: the requests that arrive meanwhile make the next batch bigger, and a
second batch thread only fought the event loop for the GIL (PostgreSQL, 32 clients: 2,800
signatures/s with two, 3,100 with one, at a quarter less CPU per request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import partial
from typing import Generic, Protocol, TypeVar

import structlog

from paysign.metrics import batch_ran, observe_batch
from paysign.store.signing_batch import FirstRead, PayerWindows
from paysign.store.signing_prefetch import NotPrefetched
from paysign.store.signing_store import PrefetchingBatches, SigningStore, SigningTransaction

log = structlog.get_logger("paysign.store")

C = TypeVar("C")
T = TypeVar("T")

#: A request's part inside the transaction: given the batch's context, its outcome.
Work = Callable[[C], T]

#: The most requests one transaction takes: bounds how long the first of them waits.
MAX_BATCH = 64


class Completion(Protocol):
    """What a batch's outcomes still need once committed, before they are answered (their
    signatures, made by ``custody.signer_process`` while the batch runs)."""

    def ran(self, outcome: object) -> None:
        """A work of a batch running on the event loop returned ``outcome`` (not committed
        yet: the batch may still roll back)."""

    def committed(self, outcomes: Sequence[object], deliver: Callable[[], None]) -> None:
        """The batch that returned ``outcomes`` is committed; call ``deliver`` (on the event
        loop, now or later) when they may be answered."""


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class GroupCommitter(Generic[C, T]):
    """Runs works in shared transactions; ``begin`` makes, for each transaction, the context
    its works are given (what they share for as long as the transaction, and no longer)."""

    def __init__(
        self,
        store: SigningStore,
        begin: Callable[[SigningTransaction], C],
        *,
        max_inflight: int = 1,
        max_batch: int = MAX_BATCH,
        completion: Completion | None = None,
        lock_order: Callable[[Work[C, T]], bytes] | None = None,
        first_read: Callable[[Work[C, T]], FirstRead | None] | None = None,
        payer_windows: Callable[[Work[C, T]], PayerWindows | None] | None = None,
    ) -> None:
        """``lock_order``: a batch's works run in this order. Works that lock rows as they
        run (a payment its account's spend windows) then lock them in one order in every
        process, so two processes' batches never wait for each other in a cycle (on
        PostgreSQL a deadlock costs a second, ``deadlock_timeout``, then a re-run alone).
        But payers by account (OAuth) and by key sort apart, and one account may come as
        both: so a store whose batches can interleave with other writers' (``inline`` false:
        SQLite has one writer at a time) is first given each work's ``payer_windows``
        (``lock_payers``), to lock them all in the order of the accounts' ids.

        ``first_read``: what a work asks of its transaction first, if known before it runs."""
        self._store = store
        self._begin = begin
        self._lock_order = lock_order
        self._first_read = first_read
        self._payer_windows = payer_windows
        self._completion = completion
        self._max_inflight = 1 if store.inline else max_inflight
        self._max_batch = max_batch
        self._queue: list[tuple[Work[C, T], asyncio.Future[T]]] = []
        self._inflight = 0

    async def run(self, work: Work[C, T]) -> T:
        """``work(tx)``'s result, once the transaction it ran in is committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.append((work, future))
        if self._store.inline:
            if self._inflight == 0:
                self._inflight = 1
                loop.call_soon(self._flush_inline)
        else:
            self._start_batches(loop)
        return await future

    def _take(self) -> list[tuple[Work[C, T], asyncio.Future[T]]]:
        batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
        observe_batch(len(batch))
        return batch

    def _flush_inline(self) -> None:
        sync = self._store.log_sync
        try:
            while self._queue:
                batch = self._take()
                ran = self._completion.ran if self._completion is not None else None
                works = [work for work, _ in batch]
                if sync is None:
                    self._complete(batch, self.run_batch(works, ran))
                    continue
                # The next batch may run while this one's commit is flushed to the disk; its
                # answers wait for the flush as much as for their signatures.
                with sync.deferred():
                    outcomes = self.run_batch(works, ran)
                flush = _Flushing(batch, outcomes)
                sync.after(flush.flushed, lone=len(batch) == 1)
                self._complete(batch, outcomes, flush.settle)
        finally:
            self._inflight = 0

    def _start_batches(self, loop: asyncio.AbstractEventLoop) -> None:
        while self._queue and self._inflight < self._max_inflight:
            batch = self._take()
            self._inflight += 1
            works = [work for work, _ in batch]
            prefetching = self._store.prefetching
            done: asyncio.Future[list[T | _Failed]]
            if prefetching is not None and self._first_read is not None:
                done = loop.create_task(self._run_prefetched(prefetching, works))
            else:
                done = loop.run_in_executor(self._store.executor, self.run_batch, works)
            done.add_done_callback(partial(self._finished, loop, batch))

    async def _run_prefetched(
        self, prefetching: PrefetchingBatches, works: list[Work[C, T]]
    ) -> list[T | _Failed]:
        """The batch on the event loop when every work's first read is known, else (or when
        that fails) on the store's threads."""
        order = self._order(works)
        assert self._first_read is not None
        reads = [self._first_read(works[i]) for i in order]
        if all(read is not None for read in reads):
            ran = self._completion.ran if self._completion is not None else None
            try:
                outcomes = await prefetching.run(
                    [read for read in reads if read is not None],
                    partial(self._run_in_order, works, order, ran),
                )
                batch_ran("read_ahead")
                return outcomes
            except NotPrefetched:  # expected: a read the batch could not make ahead
                pass
            except Exception as exc:  # a fault: the threads run it again, and keep each error
                # The type only: a driver's message may quote the values of a row.
                log.warning("read_ahead_batch_failed", error=type(exc).__name__)
        batch_ran("threads")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._store.executor, self.run_batch, works)

    def _order(self, works: list[Work[C, T]]) -> list[int]:
        order = list(range(len(works)))
        if self._lock_order is not None:
            keys = [self._lock_order(work) for work in works]
            order.sort(key=keys.__getitem__)
        return order

    def _run_in_order(
        self,
        works: list[Work[C, T]],
        order: list[int],
        ran: Callable[[object], None] | None,
        tx: SigningTransaction,
    ) -> list[T | _Failed]:
        context = self._begin(tx)
        outcomes: dict[int, T | _Failed] = {}
        for i in order:
            outcome = outcomes[i] = works[i](context)
            if ran is not None:
                ran(outcome)
        return [outcomes[i] for i in range(len(works))]

    def _finished(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[Work[C, T], asyncio.Future[T]]],
        done: asyncio.Future[list[T | _Failed]],
    ) -> None:
        self._inflight -= 1
        error = asyncio.CancelledError() if done.cancelled() else done.exception()
        if error is not None:  # only a BaseException escapes run_batch
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
        else:
            self._complete(batch, done.result())
        self._start_batches(loop)

    def _complete(
        self,
        batch: list[tuple[Work[C, T], asyncio.Future[T]]],
        outcomes: list[T | _Failed],
        settle: Callable[[], None] | None = None,
    ) -> None:
        """Answer ``batch`` (by ``settle``, when given) once its outcomes are signed."""
        deliver = settle or partial(_settle, batch, outcomes)
        if self._completion is None:
            deliver()
            return
        succeeded = [o for o in outcomes if not isinstance(o, _Failed)]
        try:
            self._completion.committed(succeeded, deliver)
        except Exception:
            # Never leave a committed request unanswered: its signature is made when answered.
            log.exception("batch_completion_failed")
            deliver()

    def run_batch(
        self, works: list[Work[C, T]], ran: Callable[[object], None] | None = None
    ) -> list[T | _Failed]:
        """Every work in one transaction; each alone in its own when anything fails.

        ``ran`` sees each outcome as it is returned, before the commit.
        """
        order = self._order(works)
        try:
            with self._store.transaction() as tx:
                if not self._store.inline and self._payer_windows is not None and len(works) > 1:
                    payers = [self._payer_windows(works[i]) for i in order]
                    tx.lock_payers([payer for payer in payers if payer is not None])
                outcomes = self._run_in_order(works, order, ran, tx)
            return outcomes
        except Exception:  # noqa: S110 - each work runs again and keeps its own error
            pass
        return [self._alone(work) for work in works]

    def _alone(self, work: Work[C, T]) -> T | _Failed:
        try:
            with self._store.transaction() as tx:
                return work(self._begin(tx))
        except Exception as exc:
            return _Failed(exc)


class _Flushing(Generic[C, T]):
    """A batch answered once both its commit is on the disk and its signatures are made."""

    __slots__ = ("batch", "error", "outcomes", "waiting")

    def __init__(
        self, batch: list[tuple[Work[C, T], asyncio.Future[T]]], outcomes: list[T | _Failed]
    ) -> None:
        self.batch = batch
        self.outcomes = outcomes
        self.error: BaseException | None = None
        self.waiting = 2

    def flushed(self, error: BaseException | None) -> None:
        self.error = error
        self.settle()

    def settle(self) -> None:
        self.waiting -= 1
        if self.waiting:
            return
        if self.error is None:
            _settle(self.batch, self.outcomes)
        else:  # committed, but perhaps not on the disk: nothing of it may be answered
            error = self.error if isinstance(self.error, Exception) else Exception()
            failed: list[T | _Failed] = [_Failed(error) for _ in self.batch]
            _settle(self.batch, failed)


def _settle(batch: list[tuple[Work[C, T], asyncio.Future[T]]], outcomes: list[T | _Failed]) -> None:
    for (_, future), outcome in zip(batch, outcomes, strict=True):
        if future.done():  # the request was cancelled (its client went away)
            continue
        if isinstance(outcome, _Failed):
            future.set_exception(outcome.error)
        else:
            future.set_result(outcome)
