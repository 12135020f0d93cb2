"""The account's audit trail: every signature, refusal, withdrawal and notification delivery,
newest first.

Each entry says what was decided (``signed`` or ``refused``), why (the problem slug of a
refusal), and which rule or switch decided it, so the holder can see what their agent did; a
``withdrawn`` entry is USDC the holder sent out (who, the address as ``payTo``, its
transaction, and the fresh authenticator code that confirmed it); a ``delivery`` is one
notification sent to one target (the target — a webhook's URL never with its credentials —,
the event, ``delivered``, ``retrying``, ``pending`` or ``failed``, the attempts and what the
last one met). A signature also says whether it moved money: ``settled`` (with its
transaction), ``expired`` (unused, its spend given back) or ``awaiting`` settlement until its
``validBefore``. The rows are read by the database a page at a time (``store.activity_repo``):
an account with a million signatures costs one page, not a million rows in memory.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from paysign.policy.caps import iso
from paysign.protocol.usdc import format_usdc
from paysign.services.accounts import require_account
from paysign.store import activity_repo
from paysign.store.activity_outbound import FRESH_CODE_DETAIL

# The portal's activity pages build filters and page cursors with these.
from paysign.store.activity_repo import MAX_SELLER_FILTER as MAX_SELLER_FILTER
from paysign.store.activity_repo import ActivityFilters as ActivityFilters
from paysign.store.activity_repo import ActivityRow as ActivityRow
from paysign.store.activity_repo import Cursor as Cursor
from paysign.store.activity_repo import Kind as Kind
from paysign.store.database import Database

EXPORT_BATCH = 1_000
#: A signature's settlement as the holder reads it, from the status the reconciler stores.
SETTLEMENT_OF_STATUS = {"signed": "awaiting", "settled": "settled", "expired": "expired"}
STATUS_OF_SETTLEMENT = {name: status for status, name in SETTLEMENT_OF_STATUS.items()}
#: Where a live Base transaction can be looked at; the sandbox chain has no explorer.
EXPLORERS = {"eip155:8453": "https://basescan.org/tx/"}
CSV_COLUMNS = (
    "time_utc",
    "decision",
    "seller",
    "amount_usdc",
    "network",
    "sandbox",
    "status",
    "reason",
    "rule",
    "detail",
    # Appended, each in its turn, so that exports read by column position keep working.
    "pay_to",
    "transaction",
    "by",  # a withdrawal's: the holder's email
    "step_up",  # a withdrawal's: how it was confirmed
    "step_up_utc",  # when the code was verified (empty on withdrawals older than that record)
    "target",  # a delivery's: the webhook (without credentials) or the email address
    "event",
    "attempts",
    "last_result",  # the last attempt's error (an HTTP status or a reason); empty when none
)


def transaction_url(row: ActivityRow) -> str | None:
    """The block explorer's page of a settled live payment's transaction; None on the sandbox
    chain (a local one no explorer knows) and for networks without one."""
    explorer = EXPLORERS.get(row.network)
    if row.sandbox or explorer is None or not row.settled_tx:
        return None
    return explorer + row.settled_tx


def delivery_status(row: ActivityRow) -> str:
    """``delivered``, ``failed`` (no attempt left), ``retrying`` (failed, another attempt to
    come) or ``pending`` (not tried yet), from the stored status and the attempts made."""
    if row.status == "pending":
        return "retrying" if row.attempts else "pending"
    return row.status or ""


def step_up(row: ActivityRow) -> str:
    """How a withdrawal was confirmed, for the export's ``step_up`` column."""
    return "authenticator code" if row.detail == FRESH_CODE_DETAIL else "none"


def _iso_or_none(moment: int | None) -> str | None:
    return iso(moment) if moment is not None else None


def entry_of(row: ActivityRow) -> dict[str, Any]:
    """One row as the CLI and the portal show it."""
    entry: dict[str, Any] = {
        "at": iso(row.created_at),
        "decision": row.kind,
        "seller": row.seller,
        "amount": row.amount,
        "network": row.network,
        "sandbox": row.sandbox,
    }
    if row.kind == "withdrawn":
        entry |= {
            "payTo": row.pay_to,
            "status": row.status,
            "transaction": row.settled_tx,
            "transactionUrl": transaction_url(row),
            "detail": row.detail,
            "by": row.by,
            "stepUp": step_up(row),
            "stepUpAt": _iso_or_none(row.code_verified_at),
        }
    elif row.kind == "delivery":
        entry |= {
            "network": None,
            "sandbox": None,
            "status": delivery_status(row),
            "targetKind": row.target_kind,
            "target": row.target,
            "event": row.event,
            "attempts": row.attempts,
            "lastResult": row.last_error,
            "deliveredAt": _iso_or_none(row.delivered_at),
            "nextAttemptAt": _iso_or_none(row.next_attempt_at),
        }
    elif row.kind == "signed":
        entry |= {
            "payTo": row.pay_to,
            "status": row.status,
            "settlement": SETTLEMENT_OF_STATUS.get(row.status or "", row.status),
            "validBefore": iso(row.valid_before) if row.valid_before is not None else None,
            "transaction": row.settled_tx,
            "transactionUrl": transaction_url(row),
            "tier": row.tier,
            "rule": row.rule,
            "nonce": "0x" + (row.nonce or b"").hex(),
        }
    else:
        entry |= {"reason": row.reason, "rule": row.rule, "detail": row.detail}
    return entry


def activity(db: Database, *, email: str, limit: int = 100) -> list[dict[str, Any]]:
    """The newest ``limit`` entries, newest first (the operator CLI)."""
    account = require_account(db, email)
    with db.read() as conn:
        rows = activity_repo.page(conn, account.id, ActivityFilters(), limit=max(limit, 0))
    return [entry_of(row) for row in rows]


@dataclass(frozen=True, slots=True)
class ActivityPage:
    rows: list[ActivityRow]
    #: Where the next older / newer page starts; ``None`` when there is none.
    older: Cursor | None
    newer: Cursor | None


def page_of(
    db: Database,
    account_id: str,
    filters: ActivityFilters,
    *,
    size: int,
    before: Cursor | None = None,
    after: Cursor | None = None,
) -> ActivityPage:
    """One page, and whether there are rows on either side of it (one row more is read in the
    direction of travel; the other side is a one-row probe)."""
    with db.read() as conn:
        rows: list[ActivityRow] = []
        if after is not None:
            rows = activity_repo.page(conn, account_id, filters, limit=size + 1, after=after)
            if len(rows) <= size:
                # Back at the newest rows: show the first page whole, not a short one.
                after, rows = None, []
        if after is None:
            rows = activity_repo.page(conn, account_id, filters, limit=size + 1, before=before)
            more_older, rows = len(rows) > size, rows[:size]
        else:
            rows = rows[-size:]  # the ``size`` rows just newer than ``after``
            more_older = bool(
                activity_repo.page(conn, account_id, filters, limit=1, before=rows[-1].cursor)
            )
        if not rows:
            return ActivityPage([], None, None)
        more_newer = bool(
            activity_repo.page(conn, account_id, filters, limit=1, after=rows[0].cursor)
        )
    return ActivityPage(
        rows,
        rows[-1].cursor if more_older else None,
        rows[0].cursor if more_newer else None,
    )


def all_rows(
    db: Database, account_id: str, filters: ActivityFilters, *, batch: int = EXPORT_BATCH
) -> Iterator[list[ActivityRow]]:
    """Every matching row, newest first, in batches of one short read each: an export of a
    large account holds neither a transaction open for long nor all rows in memory. Rows added
    while it runs are newer than the first batch, so they are neither repeated nor skipped
    within the range it read."""
    before: Cursor | None = None
    while True:
        with db.read() as conn:
            rows = activity_repo.page(conn, account_id, filters, limit=batch, before=before)
        if rows:
            yield rows
        if len(rows) < batch:
            return
        before = rows[-1].cursor


def csv_cell(text: str) -> str:
    """A cell a spreadsheet will not run: text starting with ``= + - @`` (or a tab or carriage
    return, which some spreadsheets strip first) is a formula to Excel and LibreOffice, and a
    seller URL or refusal detail comes from the agent's request. A leading quote makes it text.

    >>> csv_cell("=HYPERLINK(1)"), csv_cell("@x"), csv_cell("api.example.com/v1")
    ("'=HYPERLINK(1)", "'@x", 'api.example.com/v1')
    """
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _csv_status(row: ActivityRow) -> str:
    if row.kind == "signed":
        return SETTLEMENT_OF_STATUS.get(row.status or "", "")
    if row.kind == "delivery":
        return delivery_status(row)
    return row.status or "" if row.kind == "withdrawn" else ""


def _csv_cells(row: ActivityRow) -> list[str]:
    """One row's cells in ``CSV_COLUMNS`` order; every text that did not come from this
    service's own vocabulary goes through :func:`csv_cell`."""
    delivery = row.kind == "delivery"
    withdrawn = row.kind == "withdrawn"
    # A test or a key's expiry is about no payment: no amount rather than a made-up zero.
    no_amount = delivery and not row.seller_host
    return [
        iso(row.created_at),
        row.kind,
        csv_cell(row.seller),
        # Six decimals on every row: a spreadsheet reads them all as one format.
        "" if no_amount else format_usdc(row.amount, fixed=True),
        csv_cell(row.network),
        "" if delivery else "true" if row.sandbox else "false",
        _csv_status(row),
        csv_cell(row.reason or ""),
        csv_cell(row.rule or ""),
        csv_cell(row.detail or ""),
        csv_cell(row.pay_to or ""),
        csv_cell(row.settled_tx or ""),
        csv_cell(row.by or ""),
        step_up(row) if withdrawn else "",
        iso(row.code_verified_at) if row.code_verified_at is not None else "",
        csv_cell(row.target or ""),
        csv_cell(row.event or ""),
        str(row.attempts) if row.attempts is not None else "",
        csv_cell(row.last_error or ""),
    ]


def csv_chunks(batches: Iterator[list[ActivityRow]]) -> Iterator[str]:
    """The CSV text, a header then one chunk per batch of rows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def flush() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writerow(CSV_COLUMNS)
    yield flush()
    for rows in batches:
        for row in rows:
            writer.writerow(_csv_cells(row))
        yield flush()
