"""The activity list: every signature, refusal, withdrawal and notification delivery, filtered,
a page at a time, and as CSV.

Filters travel in the query string (a GET that changes nothing needs no CSRF token), so a
filtered page, its "older"/"newer" links and its CSV export are plain links. Every value is
checked before any query runs: a bad one is a 400 with the reason, never a 500.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from datetime import date
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from paysign.portal.web import HEADERS, PREFIX, Portal
from paysign.protocol.networks import resolve_network
from paysign.services import activity
from paysign.services.activity import MAX_SELLER_FILTER, ActivityFilters, Cursor, Kind
from paysign.services.sessions import Session

PAGE_SIZE = 50
DAY = 86_400
NETWORKS = [("eip155:8453", "Base"), ("eip155:84532", "Base Sepolia")]
FILTER_FIELDS = ("decision", "status", "seller", "network", "sandbox", "from", "to")
DECISION_CHOICES = [
    ("signed", "Signed only"),
    ("refused", "Refused only"),
    ("withdrawn", "Withdrawn only"),
    ("delivery", "Notification deliveries only"),
]
SETTLEMENTS = [
    ("awaiting", "Awaiting settlement"),
    ("settled", "Settled"),
    ("expired", "Expired unused"),
]
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class BadFilter(ValueError):
    """A filter value the page cannot use; the message says which and why."""


def _day(text: str, field: str) -> int:
    """The Unix time of 00:00 UTC on a ``YYYY-MM-DD`` day."""
    try:
        if not _DATE.fullmatch(text):
            raise ValueError
        day = date.fromisoformat(text)
    except ValueError:
        raise BadFilter(f"“{field}” must be a date like 2026-01-31 (UTC).") from None
    return calendar.timegm(day.timetuple())


def parse_filters(params: Mapping[str, str]) -> tuple[ActivityFilters, dict[str, str]]:
    """The filters of a query string, and the same values cleaned for links and the form.

    >>> found = parse_filters({"decision": "signed", "sandbox": "no", "from": "2026-01-02"})[0]
    >>> found.decision, found.sandbox, found.since, found.until
    ('signed', False, 1767312000, None)
    >>> parse_filters({"status": "awaiting"})[0].status   # as the reconciler stores it
    'signed'
    >>> parse_filters({"network": "ethereum"})
    Traceback (most recent call last):
    paysign.portal.activity_pages.BadFilter: “network” must be Base or Base Sepolia.
    """
    form = {name: params.get(name, "").strip() for name in FILTER_FIELDS}
    decision = form["decision"]
    if decision not in ("", *_DECISIONS):
        raise BadFilter("“decision” must be signed, refused, withdrawn or delivery.")
    status = form["status"]
    if status not in ("", *activity.STATUS_OF_SETTLEMENT):
        raise BadFilter("“status” must be awaiting, settled or expired.")
    if status and decision == "refused":
        raise BadFilter("A refusal has no settlement status: choose a status or refusals.")
    if status and decision == "delivery":
        raise BadFilter(
            "A notification delivery has no settlement status: choose a status or deliveries."
        )
    seller = form["seller"]
    if len(seller) > MAX_SELLER_FILTER or not seller.isprintable():
        raise BadFilter(
            f"“seller” must be printable text of at most {MAX_SELLER_FILTER} characters."
        )
    network = None
    if form["network"]:
        resolved = resolve_network(form["network"])
        if resolved is None:
            raise BadFilter("“network” must be Base or Base Sepolia.")
        network = form["network"] = resolved.caip2
    sandbox = {"": None, "yes": True, "no": False}.get(form["sandbox"], "bad")
    if sandbox == "bad":
        raise BadFilter("“sandbox” must be yes or no.")
    since = _day(form["from"], "from") if form["from"] else None
    # "to" is the last day shown, whole: rows before 00:00 UTC of the next day.
    until = _day(form["to"], "to") + DAY if form["to"] else None
    if since is not None and until is not None and since >= until:
        raise BadFilter("“from” must be on or before “to”.")
    filters = ActivityFilters(
        decision=_DECISIONS.get(decision),
        seller_contains=seller or None,
        network=network,
        sandbox=sandbox if isinstance(sandbox, bool) else None,
        since=since,
        until=until,
        status=activity.STATUS_OF_SETTLEMENT[status] if status else None,
    )
    return filters, form


_DECISIONS: dict[str, Kind] = {
    "signed": "signed",
    "refused": "refused",
    "withdrawn": "withdrawn",
    "delivery": "delivery",
}


def _cursor(params: Mapping[str, str], name: str) -> Cursor | None:
    token = params.get(name, "")
    if not token:
        return None
    try:
        return Cursor.parse(token)
    except ValueError:
        raise BadFilter("This page link is damaged; start again from the first page.") from None


def _link(path: str, form: dict[str, str], **cursor: str) -> str:
    query = {name: value for name, value in form.items() if value} | cursor
    return f"{PREFIX}{path}" + (f"?{urlencode(query)}" if query else "")


class ActivityPages:
    """What the agent asked for and what was decided."""

    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    def _render(
        self, session: Session, form: dict[str, str], *, status: int = 200, **context: Any
    ) -> Response:
        return self.portal.render(
            "activity.html",
            session,
            status=status,
            title="Activity",
            form=form,
            networks=NETWORKS,
            decisions=DECISION_CHOICES,
            settlements=SETTLEMENTS,
            csv_link=_link("/activity.csv", form),
            **context,
        )

    async def activity(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        params = request.query_params
        try:
            filters, form = parse_filters(params)
            before, after = _cursor(params, "before"), _cursor(params, "after")
            if before is not None and after is not None:
                raise BadFilter("A page is either older or newer, not both.")
        except BadFilter as bad:
            form = {name: params.get(name, "")[:MAX_SELLER_FILTER] for name in FILTER_FIELDS}
            return self._render(session, form, status=400, error=str(bad), entries=[])
        found = await run_in_threadpool(
            activity.page_of,
            self.portal.deps.db,
            session.account_id,
            filters,
            size=PAGE_SIZE,
            before=before,
            after=after,
        )
        return self._render(
            session,
            form,
            entries=[activity.entry_of(row) for row in found.rows],
            filtered=any(form.values()),
            older=_link("/activity", form, before=found.older.token()) if found.older else None,
            newer=_link("/activity", form, after=found.newer.token()) if found.newer else None,
        )

    async def export(self, request: Request) -> Response:
        """Every matching row as CSV, streamed: read in batches, written as they come."""
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        try:
            filters, _ = parse_filters(request.query_params)
        except BadFilter as bad:
            params = request.query_params
            form = {name: params.get(name, "")[:MAX_SELLER_FILTER] for name in FILTER_FIELDS}
            return self._render(session, form, status=400, error=str(bad), entries=[])
        batches = activity.all_rows(self.portal.deps.db, session.account_id, filters)
        return StreamingResponse(
            activity.csv_chunks(batches),
            media_type="text/csv; charset=utf-8",
            headers={
                **HEADERS,
                "Content-Disposition": 'attachment; filename="paysign-activity.csv"',
            },
        )
