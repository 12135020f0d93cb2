"""The signing path's storage, as the use cases see it: a transaction a batch of requests
shares (``SigningTransaction``) and the store that opens them (``SigningStore``).

Two stores implement it over the fixed SQL of ``signing_sql`` (``signing_statements`` runs it
on a raw DB-API cursor): ``signing_sqlite`` (the embedded default, on the event loop) and
``signing_postgres`` (pooled connections on threads of its own). This is the one place that
skips SQLAlchemy's statement machinery: building and cache-keying Core expressions cost ~1 ms
per request, forty times the signature. The tables are the ones declared in ``schema.py``
(migrations own them); ``tests/store`` checks both stores agree.

A transaction serves a whole batch of requests (``group_commit``) through
``signing_batch.BatchTransaction``: the key + wallet + policy row and the candidate rules are
read once, an account's day and month windows are locked once and its caps checked against
them, and the records and the spend total are written together before the commit, the total
by one update the database guards with the caps — so concurrent payments can never sum past
a cap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

from paysign.policy.caps import Caps, Window
from paysign.policy.decide import Grant
from paysign.policy.rules import Rule
from paysign.policy.seller_budgets import SellerBudget
from paysign.store.database import Database
from paysign.store.pending_queue import PendingEntry
from paysign.store.policy_repo import RefusalRecord
from paysign.store.repositories import KeyHolder, SignatureRecord
from paysign.store.signing_batch import (
    BatchTransaction,
    CapHit,
    FirstRead,
    PayerWindows,
    ReadAhead,
)
from paysign.store.signing_postgres import SIGNING_CONNECTIONS, PostgresSigningStore
from paysign.store.signing_sqlite import SqliteSigningStore


class SigningTransaction(Protocol):
    """What a signing request asks of the store, inside a database transaction that the
    requests of one batch share (``signing_batch.BatchTransaction``)."""

    def lock_payers(self, payers: Sequence[PayerWindows]) -> None:
        """Before any request runs: the batch's payers of live payments, whose spend windows a
        store with other writers locks now, in one order (the group committer calls it, not a
        request)."""
        ...

    def key_holder(
        self, key_hash: bytes, now: int, ahead: ReadAhead | None = None
    ) -> KeyHolder | None:
        """``ahead``: a hint, what the request asks next (the rules on some hosts, a
        reservation), for a store to read with the holder in the same round trip."""
        ...

    def account_holder(self, account_id: str) -> KeyHolder | None: ...

    def grants(self, account_id: str, hosts: Sequence[str]) -> list[Grant]: ...

    def reserve(
        self,
        account_id: str,
        amount: int,
        day: Window,
        month: Window,
        caps: Caps,
        hour: Window | None = None,
        budgets: Sequence[tuple[Rule, SellerBudget]] = (),
    ) -> CapHit | None:
        """Add ``amount`` to the windows (the ``hour`` too when ``caps.hourly`` is set, and each
        of ``budgets``' windows), or to none and say which cap refused."""
        ...

    def insert_signature(self, record: SignatureRecord) -> None: ...

    def touch_key(self, key_id: str, now: int) -> None: ...

    def admit_pending(self, entry: PendingEntry, cap: int) -> bool:
        """Queue ``entry`` for approval, unless it is new and ``cap`` sellers wait already."""
        ...

    def record_refusal(self, refusal: RefusalRecord) -> None: ...


R = TypeVar("R")


class PrefetchingBatches(Protocol):
    """Runs a batch whose first reads are known before it runs, on the event loop, with no
    wait but on the database's answers (``signing_postgres_async``)."""

    async def run(self, reads: Sequence[FirstRead], batch: Callable[[BatchTransaction], R]) -> R:
        """``batch(tx)``'s result once committed; raises, having committed nothing, when the
        batch asks for a read not in ``reads`` or anything else fails."""
        ...


class DeferredFlush(Protocol):
    """Puts a store's commits on the disk after they return (``wal_sync.WalSync``)."""

    def deferred(self) -> AbstractContextManager[None]:
        """Commits inside the block return before they are on the disk."""
        ...

    def after(self, flushed: Callable[[BaseException | None], None], *, lone: bool) -> None:
        """Call ``flushed`` on the event loop once every commit so far is on the disk, or with
        why it could not be; ``lone``: a lone request's, flushed at once."""
        ...


class SigningStore(Protocol):
    #: True when calls are short enough to make on the event loop itself (SQLite in-process).
    inline: bool
    #: Where the calls run when they are not inline.
    executor: Executor | None

    @property
    def log_sync(self) -> DeferredFlush | None:
        """How a batch's commits reach the disk after they return, when they may (``None``: a
        commit that returned is on the disk)."""
        ...

    @property
    def prefetching(self) -> PrefetchingBatches | None:
        """Where a batch whose first reads are known may run instead, when the store can."""
        ...

    def transaction(self) -> AbstractContextManager[SigningTransaction]:
        """Commits when the block ends normally, rolls back when it raises."""
        ...

    def close(self) -> None: ...


def signing_store_for(db: Database, *, connections: int = SIGNING_CONNECTIONS) -> SigningStore:
    """``connections``: the PostgreSQL store's pool size (and threads); SQLite has one."""
    if db.is_sqlite:
        if "///" not in db.url or db.url.endswith(":memory:"):
            raise ValueError("the signing store needs a SQLite file, not an in-memory database")
        store = SqliteSigningStore(db.url.split("///", 1)[1])
        db.on_dispose(store.close)  # its checkpoints and its log's flushes end with the pools
        return store
    return PostgresSigningStore(db, connections=connections)
