"""The signing path's SQL (``signing_sql``) run on one DB-API cursor, SQLite's or psycopg's:
``signing_batch.SigningStatements``, each call one statement (or one ``executemany``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import orjson

from paysign.policy.caps import Window
from paysign.policy.decide import Grant
from paysign.policy.rules import Rule
from paysign.policy.seller_budgets import SellerBudget
from paysign.store import signing_sql as sql
from paysign.store.pending_queue import PendingStatements
from paysign.store.policy_repo import RefusalRecord, settings_from_values
from paysign.store.repositories import SIGNATURE_COLUMNS, KeyHolder, SignatureRecord
from paysign.store.schema import signatures
from paysign.store.signing_batch import (
    FirstReads,
    HourTotal,
    PayerWindows,
    ReadAhead,
    SellerTotal,
    SpendTotal,
)


def holder_from_row(row: Sequence[Any] | None) -> KeyHolder | None:
    if row is None:
        return None
    return KeyHolder(
        key_id=row[0],
        account_id=row[1],
        last_used_at=row[2],
        wallet_id=row[3],
        wallet_address=row[4],
        sealed_wallet_key=bytes(row[5]),
        policy=settings_from_values(row[6:16]),
    )


def holder_with_grants(rows: Sequence[Sequence[Any]]) -> tuple[KeyHolder | None, list[Grant]]:
    if not rows:
        return None, []
    grants = [_grant(*row[-5:]) for row in rows if row[-5]]
    return holder_from_row(rows[0]), grants


def _grant(kind: Any, host: str, path: str, daily: int | None, monthly: int | None) -> Grant:
    budget = SellerBudget(daily, monthly) if daily is not None or monthly is not None else None
    return Grant(kind, Rule(host, path), budget)


#: A record's values in ``SIGNATURE_COLUMNS`` order: the one plain tuple per signature that
#: every way of inserting it sends (positional parameters, a ``COPY`` row).
signature_row: Callable[[SignatureRecord], tuple[Any, ...]] = attrgetter(*SIGNATURE_COLUMNS)

_JSON_KEYS = tuple(str(column) for column in SIGNATURE_COLUMNS)
_BYTES_AT = tuple(
    i
    for i, column in enumerate(SIGNATURE_COLUMNS)
    if signatures.c[column].type.python_type is bytes
)


def signatures_json(records: Sequence[SignatureRecord]) -> str:
    """``records`` as ``signing_sql.INSERT_SIGNATURES_FROM_JSON`` takes them: one object per
    record, bytes as PostgreSQL's text form of ``bytea`` (``\\x`` then hex)."""
    rows = []
    for record in records:
        row = list(signature_row(record))
        for i in _BYTES_AT:
            row[i] = "\\x" + row[i].hex()
        rows.append(dict(zip(_JSON_KEYS, row, strict=True)))
    return orjson.dumps(rows).decode()


def spend_params(total: SpendTotal) -> dict[str, Any]:
    return {
        "account_id": total.account_id,
        "day_start": total.day.start,
        "month_start": total.month.start,
        "amount": total.amount,
        "daily_cap": total.caps.daily,
        "monthly_cap": total.caps.monthly,
    }


def hour_spend_params(total: HourTotal) -> dict[str, Any]:
    return {
        "account_id": total.account_id,
        "hour_start": total.hour.start,
        "amount": total.amount,
        "hourly_cap": total.cap,
    }


def seller_spend_params(total: SellerTotal) -> dict[str, Any]:
    return {
        "account_id": total.account_id,
        "host": total.rule.host,
        "path": total.rule.path,
        "day_start": total.day.start,
        "month_start": total.month.start,
        "amount": total.amount,
        "daily_cap": total.budget.daily,
        "monthly_cap": total.budget.monthly,
    }


def _refusal_params(refusal: RefusalRecord) -> dict[str, Any]:
    return {
        "account_id": refusal.account_id,
        "api_key_id": refusal.api_key_id,
        "seller_host": refusal.seller_host,
        "seller_path": refusal.seller_path,
        "network": refusal.network,
        "amount": refusal.amount,
        "sandbox": refusal.sandbox,
        "reason": refusal.reason,
        "rule": refusal.rule,
        "detail": refusal.detail[:4000],
        "created_at": refusal.created_at,
    }


class SqlStatements(PendingStatements):
    """``SigningStatements`` over one DB-API cursor; ``sql`` adapts the parameter style."""

    def __init__(self, cursor: Any, sql: Callable[[str], str]) -> None:
        self._cur = cursor
        self._sql = sql

    def lock_payers_windows(self, payers: Sequence[PayerWindows]) -> None:
        """Nothing on SQLite: one writer at a time (``BEGIN IMMEDIATE``), so no order to keep."""

    def key_holder(self, key_hash: bytes, now: int) -> KeyHolder | None:
        self._cur.execute(self._sql(sql.KEY_HOLDER), {"key_hash": key_hash, "now": now})
        return holder_from_row(self._cur.fetchone())

    def first_reads(self, key_hash: bytes, now: int, ahead: ReadAhead) -> FirstReads:
        """Here without the windows: in process, the first reservation's own upsert costs
        less than locking them up front."""
        self._send_holder_with_grants(self._cur, key_hash, now, ahead.hosts)
        holder, grants = holder_with_grants(self._cur.fetchall())
        return holder, grants, None

    def _send_holder_with_grants(
        self, cur: Any, key_hash: bytes, now: int, hosts: Sequence[str]
    ) -> None:
        names = {f"h{i}": host for i, host in enumerate(hosts)}
        statement = self._sql(sql.key_holder_with_grants_sql(len(hosts)))
        cur.execute(statement, {"key_hash": key_hash, "now": now, **names})

    def account_holder(self, account_id: str) -> KeyHolder | None:
        self._cur.execute(self._sql(sql.ACCOUNT_HOLDER), {"account_id": account_id})
        return holder_from_row(self._cur.fetchone())

    def grants(self, account_id: str, hosts: Sequence[str]) -> list[Grant]:
        names = {f"h{i}": host for i, host in enumerate(hosts)}
        self._cur.execute(
            self._sql(sql.grants_sql(len(hosts))), {"account_id": account_id, **names}
        )
        return [_grant(*row) for row in self._cur.fetchall()]

    def reserve(self, total: SpendTotal) -> tuple[int, int] | None:
        params = spend_params(total)
        self._cur.execute(self._sql(sql.RESERVE), params)
        after = {name: int(value) for name, value in self._cur.fetchall()}
        if len(after) == 2:
            return after["daily"], after["monthly"]
        for name in after:  # the other window refused: give this one back
            start = total.day.start if name == "daily" else total.month.start
            back = {"account_id": total.account_id, "window": name, "start": start}
            self._cur.execute(self._sql(sql.UNRESERVE), {**back, "amount": total.amount})
        return None

    def lock_windows(self, account_id: str, day: Window, month: Window) -> tuple[int, int]:
        params = {"account_id": account_id, "day_start": day.start, "month_start": month.start}
        self._cur.execute(self._sql(sql.LOCK_WINDOWS), params)
        spent = {name: int(value) for name, value in self._cur.fetchall()}
        return spent["daily"], spent["monthly"]

    def add_spends(self, totals: Sequence[SpendTotal]) -> bool:
        for total in totals:
            self._cur.execute(self._sql(sql.ADD_SPEND), spend_params(total))
            if self._cur.rowcount != 2:
                return False
        return True

    def lock_hour(self, account_id: str, hour: Window) -> int:
        params = {"account_id": account_id, "hour_start": hour.start}
        self._cur.execute(self._sql(sql.LOCK_HOUR), params)
        row = self._cur.fetchone()
        return int(row[0])

    def add_hour_spend(self, total: HourTotal) -> bool:
        self._cur.execute(self._sql(sql.ADD_HOUR_SPEND), hour_spend_params(total))
        return bool(self._cur.rowcount == 1)

    def lock_seller_windows(
        self, account_id: str, rule: Rule, day: Window, month: Window
    ) -> tuple[int, int]:
        params = {
            "account_id": account_id,
            "host": rule.host,
            "path": rule.path,
            "day_start": day.start,
            "month_start": month.start,
        }
        self._cur.execute(self._sql(sql.LOCK_SELLER_WINDOWS), params)
        spent = {name: int(value) for name, value in self._cur.fetchall()}
        return spent["daily"], spent["monthly"]

    def add_seller_spend(self, total: SellerTotal) -> bool:
        self._cur.execute(self._sql(sql.ADD_SELLER_SPEND), seller_spend_params(total))
        return bool(self._cur.rowcount == 2)

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None:
        self._many(sql.INSERT_SIGNATURE, [signature_row(r) for r in records])

    def touch_keys(self, last_used: Sequence[tuple[str, int]]) -> None:
        params = [{"key_id": key_id, "now": now} for key_id, now in last_used]
        self._many(sql.TOUCH_KEY, params)

    def insert_refusals(self, refusals: Sequence[RefusalRecord]) -> None:
        self._many(sql.INSERT_REFUSAL, [_refusal_params(r) for r in refusals])
        notified = [r for r in refusals if r.reason in sql.NOTIFIED_REFUSALS]
        if notified:
            self._many(sql.INSERT_NOTIFICATION, [_refusal_params(r) for r in notified])

    def _many(self, statement: str, params: Sequence[dict[str, Any] | tuple[Any, ...]]) -> None:
        # A single row is a plain execute: psycopg sets up a pipeline for executemany.
        if len(params) == 1:
            self._cur.execute(self._sql(statement), params[0])
        else:
            self._cur.executemany(self._sql(statement), params)
