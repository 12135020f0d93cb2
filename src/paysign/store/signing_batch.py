"""One signing transaction as the requests of a batch see it: reads once, writes once.

Group commit runs dozens of requests one after the other in one transaction. Asked
statement by statement, each of them would read the same key, wallet, policy and rules and
write its own reservation, record and log line: four round trips a request on PostgreSQL, and
most of SQLite's time. Here a read is made once per transaction and kept for the rest of it,
and the writes are gathered and sent together just before the commit (``flush``):

* **Reads** (the key holder, the rules for a seller's hosts) are the same for every request in
  the transaction: it is as if all of them arrived at the moment of the first.
* **Reservations.** The first payment of an account in the transaction is reserved as a
  request alone would be, by one guarded upsert of its two window rows; that also locks them
  and says what they have spent (when it is refused, the rows are locked and read instead).
  An account with an hourly cap, or a payment under an allow rule's budget, has its day and
  month rows locked and read, then its hour's row, then the rules' budget rows (always in that
  order, rules by their text), and every such payment is checked in memory.
  The payments after it are checked in memory against that, plus what the ones before them
  took. The rows stay locked until the commit, so no other writer can spend in between; the
  flush adds the rest in one update guarded by the caps, which the database refuses if it
  would pass one (it cannot unless this module is wrong — the batch then rolls back, and each
  request runs again alone).
* **Records** (signatures, refusals, pending sellers, key last-use) are written in order, each
  kind with one call (``executemany``; ``COPY`` for PostgreSQL's signatures).
* **The approvals queue** is bounded (``admit_pending``): an account's queue is locked the first
  time one of its payments is refused for approval, and each seller is looked up there once;
  the sellers the transaction queued count as if written already.

A request that sees a refusal or a signature from this object sees exactly what it would have
seen had it run alone after the requests before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from paysign.policy.caps import Caps, Window, ceiling, windows_at
from paysign.policy.decide import Grant
from paysign.policy.rules import Rule
from paysign.policy.seller import SellerLocation
from paysign.policy.seller_budgets import SellerBudget
from paysign.store.pending_queue import PendingEntry
from paysign.store.policy_repo import RefusalRecord
from paysign.store.repositories import KeyHolder, SignatureRecord
from paysign.store.spend_totals import (
    AccountWindows,
    CapHit,
    HourTotal,
    HourWindow,
    SellerTotal,
    SellerWindows,
    SpendTotal,
)

__all__ = [
    "BatchTransaction",
    "CapHit",
    "FirstRead",
    "FirstReads",
    "HourTotal",
    "PayerWindows",
    "ReadAhead",
    "ReservationLost",
    "SellerTotal",
    "SigningStatements",
    "SpendTotal",
]


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """What a request will ask of the transaction after its key's holder: the holder's rules
    on ``hosts``, and (a live payment) a reservation in the spend ``windows``. A store may read
    them with the holder, in the same round trip."""

    hosts: Sequence[str] = ()
    windows: tuple[Window, Window] | None = None


@dataclass(frozen=True, slots=True)
class FirstRead:
    """A request's first call on its transaction, known before the batch runs: the holder of
    the API key hashed ``key_hash`` at ``now``, and what it reads next (``ahead``)."""

    key_hash: bytes
    now: int
    ahead: ReadAhead


@dataclass(frozen=True, slots=True)
class PayerWindows:
    """A payer of a batch who may reserve in the day's and month's ``windows`` at ``now``: the
    holder of the API key hashed ``key_hash``, or the account ``account_id`` (OAuth)."""

    key_hash: bytes | None
    account_id: str | None
    now: int
    windows: tuple[Window, Window]


#: The holder, their rules on the read-ahead's hosts and, when the store locked them with the
#: holder, what their two spend windows have spent (``None`` when it did not).
FirstReads = tuple[KeyHolder | None, list[Grant], tuple[int, int] | None]


class ReservationLost(RuntimeError):
    """The database refused a total the in-memory check had allowed (a bug, never a refusal)."""


class SigningStatements(Protocol):
    """The SQL a batch needs, each call one statement (or one pipelined ``executemany``)."""

    def lock_payers_windows(self, payers: Sequence[PayerWindows]) -> None:
        """Before any is read, lock (creating at 0) the two windows of each payer's account (a
        key's if live) in the order of the accounts' ids, where other writers could lock them."""
        ...

    def key_holder(self, key_hash: bytes, now: int) -> KeyHolder | None: ...

    def first_reads(self, key_hash: bytes, now: int, ahead: ReadAhead) -> FirstReads:
        """The key's holder and their rules on ``ahead.hosts`` (one statement); a store that
        can do it in the same round trip also locks the holder's ``ahead.windows``."""
        ...

    def account_holder(self, account_id: str) -> KeyHolder | None: ...

    def grants(self, account_id: str, hosts: Sequence[str]) -> list[Grant]: ...

    def reserve(self, total: SpendTotal) -> tuple[int, int] | None:
        """Add ``total.amount`` to both windows, locking them, and say what each has spent
        then; ``None`` (and nothing added) when either would pass its cap."""
        ...

    def lock_windows(self, account_id: str, day: Window, month: Window) -> tuple[int, int]:
        """Lock (creating at 0) the account's two windows; what each has spent."""
        ...

    def add_spends(self, totals: Sequence[SpendTotal]) -> bool:
        """Add each total's amount to its account's two windows unless any window would pass
        its cap (then ``False``, and the caller rolls the transaction back)."""
        ...

    def lock_hour(self, account_id: str, hour: Window) -> int:
        """Lock (creating at 0) the account's hourly window; what it has spent."""
        ...

    def lock_seller_windows(
        self, account_id: str, rule: Rule, day: Window, month: Window
    ) -> tuple[int, int]:
        """Lock (creating at 0) an allow rule's budget windows; what each has spent."""
        ...

    def add_seller_spend(self, total: SellerTotal) -> bool:
        """Add ``total.amount`` to the rule's two windows unless either would pass its cap."""
        ...

    def add_hour_spend(self, total: HourTotal) -> bool:
        """Add ``total.amount`` to the hourly window unless it would pass ``total.cap``."""
        ...

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None: ...

    def touch_keys(self, last_used: Sequence[tuple[str, int]]) -> None: ...

    def lock_pending(self, account_id: str) -> None:
        """Keep every other writer from adding to the account's queue until the commit."""
        ...

    def pending_state(self, account_id: str, seller: SellerLocation) -> tuple[int, bool]:
        """How many sellers the account has waiting, and whether ``seller`` is one."""
        ...

    def record_pending(self, entries: Sequence[PendingEntry]) -> None: ...

    def insert_refusals(self, refusals: Sequence[RefusalRecord]) -> None: ...


class _Queue:
    """One account's approvals queue inside a transaction: the sellers found waiting in the
    database, and those this transaction adds (``known`` holds both)."""

    __slots__ = ("added", "known")

    def __init__(self) -> None:
        self.known: set[tuple[str, str]] = set()
        self.added: set[tuple[str, str]] = set()


class BatchTransaction:
    """``SigningTransaction`` over ``SigningStatements``; call ``flush`` before committing."""

    def __init__(self, statements: SigningStatements) -> None:
        self._sql = statements
        self._holders: dict[tuple[bytes, int] | str, KeyHolder | None] = {}
        self._grants: dict[tuple[str, tuple[str, ...]], list[Grant]] = {}
        self._windows: dict[tuple[str, int, int], AccountWindows] = {}
        self._hours: dict[tuple[str, Window], HourWindow] = {}
        self._sellers: dict[tuple[str, Rule, int, int], SellerWindows] = {}
        self._signatures: list[SignatureRecord] = []
        self._touched: dict[str, int] = {}
        self._queues: dict[str, _Queue] = {}
        self._pending: list[PendingEntry] = []
        self._refusals: list[RefusalRecord] = []
        #: The accounts a spend cap refused a payment of: what the refusal quoted was spent.
        self.capped: set[str] = set()

    def lock_payers(self, payers: Sequence[PayerWindows]) -> None:
        """The batch's payers of live payments: their windows are locked in one order first."""
        if len(payers) > 1:
            self._sql.lock_payers_windows(payers)

    def key_holder(
        self, key_hash: bytes, now: int, ahead: ReadAhead | None = None
    ) -> KeyHolder | None:
        """``ahead``: what the request asks next, read (and locked) with the holder."""
        key = (key_hash, now)
        if key in self._holders:
            return self._holders[key]
        if ahead is None or not ahead.hosts:
            holder = self._holders[key] = self._sql.key_holder(key_hash, now)
            return holder
        holder, grants, spent = self._sql.first_reads(key_hash, now, ahead)
        self._holders[key] = holder
        if holder is None:
            return None
        self._grants.setdefault((holder.account_id, tuple(ahead.hosts)), grants)
        if spent is not None and ahead.windows is not None:
            # Locked until the commit: the reservations are checked against this in memory.
            day, month = ahead.windows
            self._windows.setdefault(
                (holder.account_id, day.start, month.start), AccountWindows(day, month, spent)
            )
        return holder

    def account_holder(self, account_id: str) -> KeyHolder | None:
        if account_id not in self._holders:
            self._holders[account_id] = self._sql.account_holder(account_id)
        return self._holders[account_id]

    def grants(self, account_id: str, hosts: Sequence[str]) -> list[Grant]:
        key = (account_id, tuple(hosts))
        found = self._grants.get(key)
        if found is None:
            found = self._grants[key] = self._sql.grants(account_id, hosts)
        return found

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
        key = (account_id, day.start, month.start)
        windows = self._windows.get(key)
        if budgets or (hour is not None and caps.hourly is not None):
            if windows is None:
                spent = self._sql.lock_windows(account_id, day, month)
                windows = self._windows[key] = AccountWindows(day, month, spent)
            return self._reserve_in_memory(windows, account_id, amount, caps, hour, budgets)
        if windows is None:
            # The account's first payment in the transaction goes straight to the database,
            # as a request alone would: one guarded upsert, which also locks both rows.
            after = self._sql.reserve(SpendTotal(account_id, day, month, caps, amount))
            if after is not None:
                windows = self._windows[key] = AccountWindows(day, month, after)
                windows.added = windows.stored = amount
                windows.caps = caps
                return None
            spent = self._sql.lock_windows(account_id, day, month)
            windows = self._windows[key] = AccountWindows(day, month, spent)
        for window, spent_so_far in ((day, windows.day_spent), (month, windows.month_spent)):
            limit = ceiling(caps.limit_of(window.name))
            if spent_so_far + amount > limit:
                return self._refused(account_id, CapHit(window, limit, spent_so_far))
        windows.add(amount, caps)
        return None

    def _refused(self, account_id: str, hit: CapHit) -> CapHit:
        self.capped.add(account_id)
        return hit

    def _reserve_in_memory(
        self,
        windows: AccountWindows,
        account_id: str,
        amount: int,
        caps: Caps,
        hour: Window | None,
        budgets: Sequence[tuple[Rule, SellerBudget]],
    ) -> CapHit | None:
        """The account's windows are locked: lock the hour's and the budgets' (in that order),
        then check every cap against what they have spent."""
        hourly = None
        if hour is not None and caps.hourly is not None:
            hourly = self._hours.get((account_id, hour))
            if hourly is None:
                spent_in_hour = self._sql.lock_hour(account_id, hour)
                hourly = self._hours[(account_id, hour)] = HourWindow(spent_in_hour)
            if hourly.spent + amount > caps.hourly:
                return self._refused(account_id, CapHit(hour, caps.hourly, hourly.spent))
        day, month = windows.day, windows.month
        for window, spent_so_far in ((day, windows.day_spent), (month, windows.month_spent)):
            limit = ceiling(caps.limit_of(window.name))
            if spent_so_far + amount > limit:
                return self._refused(account_id, CapHit(window, limit, spent_so_far))
        sellers = []
        for rule, budget in budgets:
            key = (account_id, rule, day.start, month.start)
            seller = self._sellers.get(key)
            if seller is None:
                spent = self._sql.lock_seller_windows(account_id, rule, day, month)
                seller = self._sellers[key] = SellerWindows(spent, budget)
            seller.budget = budget
            for window, spent_so_far in ((day, seller.day_spent), (month, seller.month_spent)):
                limit = ceiling(budget.limit_of(window.name))
                if spent_so_far + amount > limit:
                    return self._refused(account_id, CapHit(window, limit, spent_so_far, rule))
            sellers.append(seller)
        windows.add(amount, caps)
        if hourly is not None:
            hourly.spent += amount
            hourly.added += amount
            hourly.cap = caps.hourly
        for seller in sellers:
            seller.day_spent += amount
            seller.month_spent += amount
            seller.added += amount
        return None

    def insert_signature(self, record: SignatureRecord) -> None:
        self._signatures.append(record)

    def touch_key(self, key_id: str, now: int) -> None:
        self._touched[key_id] = max(now, self._touched.get(key_id, now))

    def admit_pending(self, entry: PendingEntry, cap: int) -> bool:
        """Queue ``entry`` (a seller already waiting just gets its terms refreshed); ``False``,
        and nothing queued, when the seller is new and ``cap`` sellers are waiting."""
        queue = self._queues.get(entry.account_id)
        if queue is None:
            self._sql.lock_pending(entry.account_id)
            queue = self._queues[entry.account_id] = _Queue()
        key = (entry.seller.host, entry.seller.path)
        if key not in queue.known:
            waiting, known = self._sql.pending_state(entry.account_id, entry.seller)
            if not known:
                if waiting + len(queue.added) >= cap:
                    return False
                queue.added.add(key)
            queue.known.add(key)
        self._pending.append(entry)
        return True

    def record_refusal(self, refusal: RefusalRecord) -> None:
        self._refusals.append(refusal)

    def flush(self) -> None:
        """Write what the batch gathered; raises ``ReservationLost`` if a cap would pass."""
        totals = [
            SpendTotal(account_id, w.day, w.month, w.caps, w.added - w.stored)
            for (account_id, _, _), w in sorted(self._windows.items())
            if w.caps is not None and w.added != w.stored
        ]
        if totals and not self._sql.add_spends(totals):
            raise ReservationLost("a batch's spend total passed a cap it had checked")
        for (account_id, hour), h in sorted(self._hours.items(), key=lambda i: i[0][0]):
            if h.cap is None or not h.added:
                continue
            if not self._sql.add_hour_spend(HourTotal(account_id, hour, h.cap, h.added)):
                raise ReservationLost("a batch's hourly total passed the cap it had checked")
        for (account_id, rule, day_start, _), s in sorted(
            self._sellers.items(), key=lambda item: (item[0][0], str(item[0][1]))
        ):
            if not s.added:
                continue
            day, month = windows_at(day_start)
            under_rule = SellerTotal(account_id, rule, day, month, s.budget, s.added)
            if not self._sql.add_seller_spend(under_rule):
                raise ReservationLost("a batch's total under a rule's budget passed it")
        if self._signatures:
            self._sql.insert_signatures(self._signatures)
        if self._touched:
            self._sql.touch_keys(sorted(self._touched.items()))
        if self._pending:
            self._sql.record_pending(self._pending)
        if self._refusals:
            self._sql.insert_refusals(self._refusals)
        self._windows.clear()
        self._hours.clear()
        self._sellers.clear()
        self._queues.clear()
        self._signatures, self._touched, self._pending, self._refusals = [], {}, [], []
