"""A batch's reads made before it runs, so that it runs without a wait on the database.

Every request of a batch starts the same way: the holder of its API key, their rules on the
seller's hosts and, for a live payment, their two spend windows (and the hour's, under an
hourly cap, and those of their allow rules' budgets on those hosts), locked (``FirstRead``). Known
before the batch runs, these are read for the whole batch at once (``planned_reads``: one read
per payer and moment, in the batch's lock order); the batch then runs on
``PrefetchedStatements``, whose reads are answered from what was read and whose writes are kept
to be sent with the COMMIT. A read that was not made ahead (the approvals queue, an OAuth
payer) raises ``NotPrefetched``: the batch is
rolled back, nothing of it answered, and it runs again where each read goes to the database as
it is asked (``signing_postgres_async``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from paysign.policy.caps import Window, ceiling, hour_window
from paysign.policy.decide import Grant
from paysign.policy.rules import Rule
from paysign.policy.seller import SellerLocation
from paysign.store import signing_sql as sql
from paysign.store.postgres_statements import PostgresStatements, psycopg_style
from paysign.store.repositories import KeyHolder, SignatureRecord
from paysign.store.signing_batch import (
    FirstRead,
    FirstReads,
    HourTotal,
    ReadAhead,
    SellerTotal,
    SpendTotal,
)
from paysign.store.signing_statements import signatures_json


class NotPrefetched(Exception):
    """The batch asked for a read that was not made before it ran."""


@dataclass(frozen=True, slots=True)
class PlannedRead:
    """One payer's reads at one moment, for every request of the batch that starts with them:
    the rules on all their hosts, and the windows when any of them is a live payment (the
    hour's and the allow rules' budgets' too, unless ``hour`` or ``budgets`` is off)."""

    key_hash: bytes
    now: int
    hosts: tuple[str, ...]
    windows: tuple[Window, Window] | None
    hour: bool = True
    budgets: bool = True


@dataclass(frozen=True, slots=True)
class PayerReads:
    """What a ``PlannedRead`` found: the holder (``None``: no live key), their rules on the
    planned hosts and, when windows were planned, what each has spent and, under an hourly
    cap, what the hour has (all locked until the commit)."""

    plan: PlannedRead
    holder: KeyHolder | None
    grants: list[Grant]
    spent: tuple[int, int] | None
    hour_spent: int | None = None
    #: Each budgeted allow rule's windows on the planned hosts; ``None`` when not read.
    budgets_spent: dict[Rule, tuple[int, int]] | None = None
    #: The digest of the holder and rules read (``signing_sql.fingerprinted_holder_sql``).
    fingerprint: bytes | None = None


def planned_reads(reads: Sequence[FirstRead]) -> list[PlannedRead]:
    """``reads`` merged per (key, moment), in the order each first appears.

    >>> ahead = ReadAhead(("a.example",), None)
    >>> [p.hosts for p in planned_reads([FirstRead(b"k", 1, ahead)] * 2)]
    [('a.example',)]
    """
    merged: dict[tuple[bytes, int], tuple[dict[str, None], tuple[Window, Window] | None]] = {}
    for read in reads:
        hosts, windows = merged.setdefault((read.key_hash, read.now), ({}, None))
        hosts.update(dict.fromkeys(read.ahead.hosts))
        if windows is None and read.ahead.windows is not None:
            merged[(read.key_hash, read.now)] = (hosts, read.ahead.windows)
    return [
        PlannedRead(key_hash, now, tuple(hosts), windows)
        for (key_hash, now), (hosts, windows) in merged.items()
    ]


class _WriteRecorder:
    """A cursor that keeps the statements it is given, to be sent later; it has no results."""

    def __init__(self) -> None:
        #: (many, statement, parameters), in the order given.
        self.calls: list[tuple[bool, str, Any]] = []

    def execute(self, statement: str, params: Any = None) -> None:
        self.calls.append((False, statement, params))

    def executemany(self, statement: str, params: Sequence[Any]) -> None:
        self.calls.append((True, statement, list(params)))

    def fetchone(self) -> Any:
        raise NotPrefetched("a read the batch did not plan")

    def fetchall(self) -> Any:
        raise NotPrefetched("a read the batch did not plan")


class PrefetchedStatements(PostgresStatements):
    """``SigningStatements`` over reads made ahead (``found``); ``writes`` holds the rest.

    ``found`` may be an earlier batch's reads (``known_payers``), whose windows' totals may be
    stale: the database's guards still refuse any total past a cap."""

    def __init__(self, found: Sequence[PayerReads]) -> None:
        self.writes = _WriteRecorder()
        super().__init__(self.writes, psycopg_style)
        self.found = list(found)
        #: What the batch added to the windows, and the keys it marked used (to carry forward).
        self.added: list[SpendTotal | HourTotal | SellerTotal] = []
        self.touched: list[tuple[str, int]] = []
        self._found = {(r.plan.key_hash, r.plan.now): r for r in found}
        self._by_account: dict[str, list[PayerReads]] = {}
        for reads in found:
            if reads.holder is not None:
                self._by_account.setdefault(reads.holder.account_id, []).append(reads)

    def _payer(self, key_hash: bytes, now: int) -> PayerReads:
        found = self._found.get((key_hash, now))
        if found is None:
            raise NotPrefetched("a payer the batch did not plan")
        return found

    def key_holder(self, key_hash: bytes, now: int) -> KeyHolder | None:
        return self._payer(key_hash, now).holder

    def first_reads(self, key_hash: bytes, now: int, ahead: ReadAhead) -> FirstReads:
        found = self._payer(key_hash, now)
        if found.holder is None:
            return None, [], None
        grants = self._grants_of(found, ahead.hosts)
        if grants is None:
            raise NotPrefetched("rules on hosts the batch did not plan")
        windows = ahead.windows
        spent = found.spent if windows is not None and windows == found.plan.windows else None
        return found.holder, grants, spent

    def grants(self, account_id: str, hosts: Sequence[str]) -> list[Grant]:
        for found in self._by_account.get(account_id, ()):
            grants = self._grants_of(found, hosts)
            if grants is not None:
                return grants
        raise NotPrefetched("rules on hosts the batch did not plan")

    @staticmethod
    def _grants_of(found: PayerReads, hosts: Sequence[str]) -> list[Grant] | None:
        """The rules on ``hosts`` (what ``grants`` would read), if all of them were planned."""
        wanted = set(hosts)
        if not wanted <= set(found.plan.hosts):
            return None
        return [grant for grant in found.grants if grant.rule.host in wanted]

    def lock_windows(self, account_id: str, day: Window, month: Window) -> tuple[int, int]:
        # Locked when read; the batch asks once per account, before it adds anything to them.
        for found in self._by_account.get(account_id, ()):
            if found.spent is not None and found.plan.windows == (day, month):
                return found.spent
        raise NotPrefetched("spend windows the batch did not plan")

    def reserve(self, total: SpendTotal) -> tuple[int, int] | None:
        """The account's first reservation when its first request was not a live payment:
        checked against the windows locked ahead, and written with the batch's other writes
        (by the statement that fails the batch rather than pass a cap)."""
        day_spent, month_spent = self.lock_windows(total.account_id, total.day, total.month)
        for limit, spent in ((total.caps.daily, day_spent), (total.caps.monthly, month_spent)):
            if spent + total.amount > ceiling(limit):
                return None
        self.add_spends([total])
        return day_spent + total.amount, month_spent + total.amount

    def add_spends(self, totals: Sequence[SpendTotal]) -> bool:
        """The totals in the order of their accounts' ids, the order in which a batch on
        locked reads, in this process or another, locks the same windows
        (``signing_sql.LOCK_PAYERS_WINDOWS``): on known payers, these statements are where
        they are locked, and in any other order two such batches could each hold a window the
        other waits for."""
        ordered = sorted(totals, key=lambda total: total.account_id)
        self.added.extend(ordered)
        return super().add_spends(ordered)

    def add_hour_spend(self, total: HourTotal) -> bool:
        self.added.append(total)
        return super().add_hour_spend(total)

    def add_seller_spend(self, total: SellerTotal) -> bool:
        self.added.append(total)
        return super().add_seller_spend(total)

    def touch_keys(self, last_used: Sequence[tuple[str, int]]) -> None:
        self.touched.extend(last_used)
        super().touch_keys(last_used)

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None:
        """One statement for them all, whatever their number: it goes with the other writes."""
        self.writes.execute(
            psycopg_style(sql.INSERT_SIGNATURES_FROM_JSON), (signatures_json(records),)
        )

    def account_holder(self, account_id: str) -> KeyHolder | None:
        raise NotPrefetched("a payer by account")

    def lock_hour(self, account_id: str, hour: Window) -> int:
        for found in self._by_account.get(account_id, ()):
            if found.hour_spent is not None and hour_window(found.plan.now) == hour:
                return found.hour_spent
        raise NotPrefetched("an hourly window the batch did not plan")

    def lock_seller_windows(
        self, account_id: str, rule: Rule, day: Window, month: Window
    ) -> tuple[int, int]:
        for found in self._by_account.get(account_id, ()):
            budgets = found.budgets_spent
            if budgets is not None and rule in budgets and found.plan.windows == (day, month):
                return budgets[rule]
        raise NotPrefetched("an allow rule's budget windows the batch did not plan")

    def lock_pending(self, account_id: str) -> None:
        raise NotPrefetched("the approvals queue")

    def pending_state(self, account_id: str, seller: SellerLocation) -> tuple[int, bool]:
        raise NotPrefetched("the approvals queue")
