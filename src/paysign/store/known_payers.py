"""What the last batches read of each payer, so that the next one runs in one round trip.

A batch on PostgreSQL reads its payers' holders, rules and windows, decides, then writes: two
round trips, with the windows locked from the first to the commit. A payer paid for a moment
ago needs neither the read nor the lock:

* **The holder and their rules** are taken from here, and the write's round trip checks them:
  its first statement (``signing_sql.GUARD_HOLDERS_UNCHANGED``) fails the transaction unless
  the key is still live and a digest of everything read of the holder and their rules is
  unchanged, so a revoked key, a new rule or a lowered cap is never missed.
* **What the windows have spent** is what was read plus what this process added since. Another
  process may have added to them too: the totals here can only be low, and an approval checked
  on a low total is still guarded by the database, whose update refuses any total past a cap
  (the batch is then run again on locked reads). A cap refusal is only ever made on locked reads
  (``signing_batch.BatchTransaction.capped``): it quotes what was spent. An account a cap has
  just refused is read with locks until a batch of theirs passes no cap.

A payer not found here, in another window or hour, or whose batch asks for anything more (the
approvals queue, another rule's budget) is read as before (``signing_postgres_async``).

>>> KnownPayers().reads_for([PlannedRead(b"k", 1, ("a.example",), None)]) is None
True
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from paysign.policy.caps import hour_window
from paysign.policy.decide import Grant
from paysign.policy.rules import Rule
from paysign.store.repositories import KeyHolder
from paysign.store.signing_batch import HourTotal, SellerTotal, SpendTotal
from paysign.store.signing_prefetch import PayerReads, PlannedRead, PrefetchedStatements

K = TypeVar("K")

#: Payers remembered; past this, all are forgotten (a payer unknown is read as before).
MAX_REMEMBERED = 50_000


@dataclass(frozen=True, slots=True)
class _Holder:
    holder: KeyHolder
    grants: list[Grant]
    fingerprint: bytes


#: (start of the first window, start of the second, spent in the first, spent in the second).
_Windows = tuple[int, int, int, int]


class KnownPayers:
    """Holders by (key, hosts), and what their accounts' windows have spent, by account."""

    def __init__(self) -> None:
        self._holders: dict[tuple[bytes, tuple[str, ...]], _Holder] = {}
        self._windows: dict[str, _Windows] = {}
        self._hours: dict[str, tuple[int, int]] = {}
        self._budgets: dict[tuple[str, Rule], _Windows] = {}

    def reads_for(self, plans: Sequence[PlannedRead]) -> list[PayerReads] | None:
        """What ``plans`` would read, if every payer is known in their windows; else ``None``."""
        found = []
        for plan in plans:
            reads = self._reads_for(plan)
            if reads is None:
                return None
            found.append(reads)
        return found

    def _reads_for(self, plan: PlannedRead) -> PayerReads | None:
        known = self._holders.get((plan.key_hash, plan.hosts))
        if known is None:
            return None
        holder, grants = known.holder, known.grants
        if plan.windows is None:
            return PayerReads(plan, holder, grants, None, fingerprint=known.fingerprint)
        account = holder.account_id
        day, month = plan.windows
        windows = self._windows.get(account)
        if windows is None or windows[:2] != (day.start, month.start):
            return None
        hour_spent = None
        if holder.policy.caps.hourly is not None:
            hour = self._hours.get(account)
            if hour is None or hour[0] != hour_window(plan.now).start:
                return None
            hour_spent = hour[1]
        budgets: dict[Rule, tuple[int, int]] = {}
        for grant in grants:
            if grant.kind != "allow" or grant.budget is None:
                continue
            spent = self._budgets.get((account, grant.rule))
            if spent is None or spent[:2] != (day.start, month.start):
                return None
            budgets[grant.rule] = spent[2:]
        return PayerReads(
            replace(plan, hour=hour_spent is not None, budgets=bool(budgets)),
            holder,
            grants,
            windows[2:],
            hour_spent,
            budgets or None,
            known.fingerprint,
        )

    def remember(
        self, statements: PrefetchedStatements, capped: Collection[str] = frozenset()
    ) -> None:
        """After the commit of a batch run on ``statements``: its payers as read, and what
        their windows have spent with what the batch added; ``capped``: the accounts a spend
        cap refused a payment of, whose windows are read with locks again next time."""
        if len(self._holders) > MAX_REMEMBERED:
            self.clear()
        touched = dict(statements.touched)
        accounts: set[str] = set()
        for reads in statements.found:
            holder, plan = reads.holder, reads.plan
            if holder is None or reads.fingerprint is None:
                continue
            if holder.key_id in touched:
                holder = replace(holder, last_used_at=touched[holder.key_id])
            known = _Holder(holder, reads.grants, reads.fingerprint)
            self._holders[(plan.key_hash, plan.hosts)] = known
            account = holder.account_id
            if reads.spent is None or plan.windows is None or account in accounts:
                continue
            accounts.add(account)
            if account in capped:
                self._forget_windows(account)  # at a cap: refusals are made on locked reads
            else:
                self._read(account, reads)
        for total in statements.added:
            self._add(total)

    def _read(self, account: str, reads: PayerReads) -> None:
        assert reads.plan.windows is not None and reads.spent is not None
        day, month = reads.plan.windows
        self._windows[account] = (day.start, month.start, *reads.spent)
        if reads.hour_spent is not None:
            self._hours[account] = (hour_window(reads.plan.now).start, reads.hour_spent)
        for rule, spent in (reads.budgets_spent or {}).items():
            self._budgets[(account, rule)] = (day.start, month.start, *spent)

    def _add(self, total: SpendTotal | HourTotal | SellerTotal) -> None:
        account, amount = total.account_id, total.amount
        if isinstance(total, HourTotal):
            hour = self._hours.get(account)
            if hour is not None and hour[0] == total.hour.start:
                self._hours[account] = (hour[0], hour[1] + amount)
        elif isinstance(total, SellerTotal):
            _add_to(self._budgets, (account, total.rule), total)
        else:
            _add_to(self._windows, account, total)

    def forget(self, plans: Sequence[PlannedRead]) -> None:
        """``plans``' payers, and their accounts' windows, are read again next time."""
        for plan in plans:
            known = self._holders.pop((plan.key_hash, plan.hosts), None)
            if known is None:
                continue
            self._forget_windows(known.holder.account_id)

    def _forget_windows(self, account: str) -> None:
        self._windows.pop(account, None)
        self._hours.pop(account, None)
        for key in [key for key in self._budgets if key[0] == account]:
            del self._budgets[key]

    def clear(self) -> None:
        """Every payer is read again next time."""
        self._holders.clear()
        self._windows.clear()
        self._hours.clear()
        self._budgets.clear()


def _add_to(table: dict[K, _Windows], key: K, total: SpendTotal | SellerTotal) -> None:
    """``total`` added to ``table[key]``; a total in other windows than those known leaves
    them unknown (the next batch reads them)."""
    spent = table.pop(key, None)
    if spent is not None and spent[:2] == (total.day.start, total.month.start):
        table[key] = (spent[0], spent[1], spent[2] + total.amount, spent[3] + total.amount)
