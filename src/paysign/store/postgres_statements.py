"""The signing path's statements on a psycopg cursor in pipeline mode
(``signing_statements.SqlStatements`` where PostgreSQL can do better), and psycopg's spelling
of their placeholders. ``signing_postgres`` runs them on its threads; ``signing_prefetch`` keeps
their writes for ``signing_postgres_async``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

import orjson

from paysign.store import signing_sql as sql
from paysign.store.pending_queue import PostgresPendingStatements
from paysign.store.repositories import SignatureRecord
from paysign.store.signing_batch import (
    FirstReads,
    HourTotal,
    PayerWindows,
    ReadAhead,
    SellerTotal,
    SpendTotal,
)
from paysign.store.signing_statements import (
    SqlStatements,
    holder_with_grants,
    hour_spend_params,
    seller_spend_params,
    signature_row,
    spend_params,
)

#: From this many signatures in a batch, they go by ``COPY``.
COPY_FROM_ROWS = 4


def payers_to_lock(payers: Iterable[PayerWindows]) -> str | None:
    """``signing_sql.LOCK_PAYERS_WINDOWS``' parameter for ``payers``; ``None`` for fewer than
    two different ones, whose windows are locked in one order by their own reads.

    >>> from paysign.policy.caps import windows_at
    >>> now = 1_790_000_000
    >>> payers_to_lock([PayerWindows(None, "a-1", now, windows_at(now))] * 2) is None
    True
    """
    rows = {
        payer: {
            "key_hash": None if payer.key_hash is None else payer.key_hash.hex(),
            "account_id": payer.account_id,
            "now": payer.now,
            "day_start": payer.windows[0].start,
            "month_start": payer.windows[1].start,
        }
        for payer in payers
    }
    return orjson.dumps(list(rows.values())).decode() if len(rows) > 1 else None


class PostgresStatements(PostgresPendingStatements, SqlStatements):
    """The statements for a cursor in pipeline mode: nothing waits for a result it does not
    read."""

    def __init__(self, cursor: Any, sql: Callable[[str], str]) -> None:
        super().__init__(cursor, sql)
        self.to_copy: list[SignatureRecord] = []

    def first_reads(self, key_hash: bytes, now: int, ahead: ReadAhead) -> FirstReads:
        """The holder with their rules and, for a live payment, their two spend windows
        locked: two statements, one round trip."""
        if ahead.windows is None:
            return super().first_reads(key_hash, now, ahead)
        day, month = ahead.windows
        with self._cur.connection.cursor() as windows:
            self._send_holder_with_grants(self._cur, key_hash, now, ahead.hosts)
            params = {"key_hash": key_hash, "now": now, "day_start": day.start}
            windows.execute(
                self._sql(sql.LOCK_WINDOWS_OF_KEY), {**params, "month_start": month.start}
            )
            holder, grants = holder_with_grants(self._cur.fetchall())
            spent = {name: int(value) for name, value in windows.fetchall()}
        if holder is None or len(spent) != 2:
            return holder, grants, None
        return holder, grants, (spent["daily"], spent["monthly"])

    def lock_payers_windows(self, payers: Sequence[PayerWindows]) -> None:
        """One statement, sent with the first read."""
        rows = payers_to_lock(payers)
        if rows is not None:
            self._cur.execute(self._sql(sql.LOCK_PAYERS_WINDOWS), {"payers": rows})

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None:
        """A few by ``executemany`` in the pipeline; more are kept for ``COPY`` after it
        (``copy_signatures``), at a third of the CPU per row."""
        if len(records) < COPY_FROM_ROWS:
            super().insert_signatures(records)
        else:
            self.to_copy = list(records)

    def copy_signatures(self) -> None:
        with self._cur.copy(sql.COPY_SIGNATURES) as copy:
            for record in self.to_copy:
                copy.write_row(signature_row(record))
        self.to_copy = []

    def add_spends(self, totals: Sequence[SpendTotal]) -> bool:
        """Always ``True``: a total the guard refuses fails the transaction instead (see
        ``ADD_SPEND_OR_FAIL``), which ``PostgresSigningStore`` reports as ``ReservationLost``.
        A statement per account, in the order given: the order their windows are locked in.
        (One statement for all, its rows locked in order by ``FOR UPDATE`` before the update,
        made two processes on one database slower than one.)"""
        for total in totals:
            self._cur.execute(self._sql(sql.ADD_SPEND_OR_FAIL), spend_params(total))
        return True

    def add_hour_spend(self, total: HourTotal) -> bool:
        """Always ``True``, as ``add_spend``."""
        self._cur.execute(self._sql(sql.ADD_HOUR_SPEND_OR_FAIL), hour_spend_params(total))
        return True

    def add_seller_spend(self, total: SellerTotal) -> bool:
        """Always ``True``, as ``add_spend``."""
        self._cur.execute(self._sql(sql.ADD_SELLER_SPEND_OR_FAIL), seller_spend_params(total))
        return True


# The statements' placeholders (``:name``, and ``?`` where a row comes as a tuple) in psycopg's
# spelling; the server receives ``$1``, ``$2``... either way.
_PLACEHOLDER = re.compile(r"(?<![:\w]):(\w+)|\?")


@lru_cache(maxsize=128)
def psycopg_style(statement: str) -> str:
    """``statement`` with psycopg's placeholders (``PostgresStatements`` takes it)."""
    return _PLACEHOLDER.sub(lambda m: "%s" if m[1] is None else f"%({m[1]})s", statement)
