"""Which of a payer's optional windows a batch reads ahead, from what their last batch found.

Every live payment's read ahead locks the day's and the month's windows. The hour's matters
only under an hourly cap, and the allow rules' budgets only where such a rule has one; most
payers have neither, and their two statements are a third of the read's work on the server.
So a payer's reads leave them out once a batch has found them unneeded (the hour's, per payer;
the budgets', per payer and hosts).

A hint that has gone stale cannot pass a cap: a batch that then asks for a window not read
meets ``NotPrefetched``, runs on the threads where every read is made, and the payer's hints
are forgotten, so that their next batch reads everything again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from paysign.store.signing_prefetch import PayerReads, PlannedRead

#: Payers remembered; past this, all are forgotten (a payer unknown reads everything).
MAX_REMEMBERED = 100_000


class ReadAheadHints:
    """What the last batch of each payer found it needed.

    >>> hints = ReadAheadHints()
    >>> plan = PlannedRead(b"k", 1, ("a.example",), None)
    >>> hints.apply([plan])[0].hour
    True
    """

    def __init__(self) -> None:
        self._hour: dict[bytes, bool] = {}
        self._budgets: dict[tuple[bytes, tuple[str, ...]], bool] = {}

    def apply(self, plans: Sequence[PlannedRead]) -> list[PlannedRead]:
        """``plans``, each without the windows its payer's last batch found unneeded."""
        return [
            replace(
                plan,
                hour=self._hour.get(plan.key_hash, True),
                budgets=self._budgets.get((plan.key_hash, plan.hosts), True),
            )
            for plan in plans
        ]

    def learn(self, found: Sequence[PayerReads]) -> None:
        """Remembers, of each payer read, whether their policy has an hourly cap and whether
        their allow rules on the plan's hosts have a budget."""
        if len(self._hour) > MAX_REMEMBERED or len(self._budgets) > MAX_REMEMBERED:
            self._hour.clear()
            self._budgets.clear()
        for reads in found:
            holder, plan = reads.holder, reads.plan
            if holder is None:
                continue
            self._hour[plan.key_hash] = holder.policy.caps.hourly is not None
            budgeted = any(grant.kind == "allow" and grant.budget for grant in reads.grants)
            self._budgets[(plan.key_hash, plan.hosts)] = budgeted

    def forget(self, plans: Sequence[PlannedRead]) -> None:
        """The payers of ``plans`` read everything again next time."""
        for plan in plans:
            self._hour.pop(plan.key_hash, None)
            self._budgets.pop((plan.key_hash, plan.hosts), None)
