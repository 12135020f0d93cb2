"""The activity's rows of what left the service for the holder: withdrawals (who, the
destination, the transaction, the code that confirmed it) and notification deliveries (the
target, the event, how many attempts and what the last one met).

A webhook's URL may carry its credential: user info, a query (``?token=...``), a fragment, or a
long random path segment (``/services/T0/B0/XXXXXXXX...``). The activity shows none of them,
neither in the target nor quoted in an error, because an export travels further than the
notifications page does.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit, urlunsplit

import sqlalchemy as sa

from paysign.store.activity_rows import ActivityFilters, Cursor, position, union_columns
from paysign.store.schema import (
    accounts,
    notification_deliveries,
    notification_outbox,
    notification_targets,
    withdrawals,
)

#: A path segment this long is taken for a credential (webhook tokens are longer; the words of
#: a path rarely are).
SECRET_SEGMENT_LENGTH = 16
ELIDED = "…"
#: A withdrawal's ``detail`` when an authenticator code confirmed it.
FRESH_CODE_DETAIL = "confirmed with a fresh authenticator code"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def shown_url(url: str) -> str:
    """A webhook URL without what may be a credential in it.

    >>> shown_url("https://user:pass@hooks.example.com:8443/hook?token=SECRET#frag")
    'https://hooks.example.com:8443/hook'
    >>> shown_url("https://hooks.slack.com/services/T0001/B0001/aXbYcZ1234567890dEfGhIjK")
    'https://hooks.slack.com/services/T0001/B0001/…'
    """
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    path = "/".join(
        ELIDED if len(segment) >= SECRET_SEGMENT_LENGTH else segment
        for segment in parts.path.split("/")
    )
    return urlunsplit((parts.scheme, host, path, "", ""))


def _secrets_of(url: str) -> list[str]:
    """Every piece of ``url`` that may be a credential, raw and decoded, longest first (so a
    whole query goes before one of its values)."""
    parts = urlsplit(url)
    found = [parts.netloc.rpartition("@")[0], parts.query, parts.fragment]
    found += [s for s in parts.path.split("/") if len(s) >= SECRET_SEGMENT_LENGTH]
    found += [value for value in (parts.username, parts.password) if value]
    for piece in parts.query.split("&"):
        raw = piece.partition("=")[2]
        found += [raw, unquote_plus(raw)]
    # Shorter than this, a value on its own is no credential, and eliding it would shred text.
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def scrubbed(text: str, url: str) -> str:
    """An error's text with every URL in it shown as :func:`shown_url` does, and any piece of
    ``url``'s credentials it still quotes (decoded, say) elided.

    >>> url = "https://h.example/x?token=S3CRET"
    >>> scrubbed(f"calling {url} failed: S3CRET refused", url)
    'calling https://h.example/x failed: … refused'
    """
    text = _URL.sub(lambda found: shown_url(found.group(0)), text)
    pieces = _secrets_of(url)
    for secret in pieces:
        text = text.replace(secret, ELIDED)
    return _without_a_cut_secret(text, pieces)


def _without_a_cut_secret(text: str, pieces: list[str]) -> str:
    """``text`` without a tail that begins one of ``pieces``: errors stored before they were
    scrubbed were cut at a fixed length, possibly inside a credential, leaving a piece too short
    to be told from a word.

    >>> _without_a_cut_secret("calling https://h.example/ab/T0SECRETto", ["T0SECRETtokenABCDEFG"])
    'calling https://h.example/ab/…'
    """
    for secret in pieces:
        for length in range(len(secret) - 1, 3, -1):
            if text.endswith(secret[:length]):
                return text[:-length] + ELIDED
    return text


def withdrawals_match(filters: ActivityFilters) -> bool:
    """A withdrawal has no seller and no signature status: those filters leave it out."""
    return filters.status is None and not filters.seller_contains


def withdrawal_branch(
    account_id: str,
    filters: ActivityFilters,
    cursor: Cursor | None,
    older: bool,
    limit: int,
) -> sa.Select[tuple[object, ...]]:
    """Withdrawals in the activity's columns: no seller, the destination as ``pay_to``, the
    transaction as ``settled_tx``, the holder's email as ``by_email``, and how the holder
    confirmed it in ``detail`` and ``code_verified_at``."""
    c = withdrawals.c
    text = sa.String()
    columns = union_columns(
        "withdrawn",
        {
            "id": c.id,
            "created_at": c.created_at,
            "seller_host": sa.literal("", text),
            "seller_path": sa.literal("", text),
            "amount": c.amount,
            "network": c.network,
            "sandbox": c.sandbox,
            "pay_to": c.to_address,
            "status": c.status,
            "nonce": c.nonce,
            "detail": sa.case(
                (c.fresh_code, sa.literal(FRESH_CODE_DETAIL, text)),
                else_=sa.literal("confirmed without an authenticator code", text),
            ),
            "settled_tx": c.transaction_hash,
            "by_email": accounts.c.email,
            "code_verified_at": c.code_verified_at,
        },
    )
    where: list[sa.ColumnElement[bool]] = [c.account_id == account_id]
    if filters.network is not None:
        where.append(c.network == filters.network)
    if filters.sandbox is not None:
        where.append(c.sandbox == filters.sandbox)
    if filters.since is not None:
        where.append(c.created_at >= filters.since)
    if filters.until is not None:
        where.append(c.created_at < filters.until)
    if cursor is not None:
        where.append(position(c.created_at, (c.id,), "withdrawn", cursor, older))
    order = (c.created_at.desc(), c.id.desc()) if older else (c.created_at.asc(), c.id.asc())
    inner = (
        sa.select(*columns)
        .select_from(withdrawals.join(accounts, accounts.c.id == c.account_id))
        .where(*where)
        .order_by(*order)
        .limit(limit)
        .subquery()
    )
    return sa.select(inner)


def deliveries_match(filters: ActivityFilters) -> bool:
    """A delivery is on no network and has no signature status: those filters leave it out.
    The seller filter keeps the deliveries of events about a matching seller."""
    return filters.status is None and filters.network is None and filters.sandbox is None


def delivery_branch(
    account_id: str,
    filters: ActivityFilters,
    cursor: Cursor | None,
    older: bool,
    limit: int,
) -> sa.Select[tuple[object, ...]]:
    """Deliveries in the activity's columns: the event's seller and amount (a refusal's; empty
    for a test or a key's expiry), the target, the stored status and attempts. Ties in a
    second are broken by the event's id, then the delivery's own (``ref``)."""
    d, t, o = notification_deliveries, notification_targets, notification_outbox
    text = sa.String()
    columns = union_columns(
        "delivery",
        {
            "id": d.c.outbox_id,
            "ref": d.c.id,
            "created_at": d.c.created_at,
            "seller_host": o.c.seller_host,
            "seller_path": o.c.seller_path,
            "amount": o.c.amount,
            "network": sa.literal("", text),
            "sandbox": sa.literal(False, sa.Boolean()),
            "status": d.c.status,
            "target_kind": t.c.kind,
            "target_url": t.c.url,
            "event": o.c.event,
            "attempts": d.c.attempts,
            "last_error": d.c.last_error,
            "delivered_at": d.c.delivered_at,
            "next_attempt_at": d.c.next_attempt_at,
        },
    )
    # The target and the event are the account's too; checked again, not assumed.
    where: list[sa.ColumnElement[bool]] = [
        d.c.account_id == account_id,
        t.c.account_id == account_id,
        o.c.account_id == account_id,
    ]
    if filters.seller_contains:
        where.append(
            (o.c.seller_host + o.c.seller_path).icontains(filters.seller_contains, autoescape=True)
        )
    if filters.since is not None:
        where.append(d.c.created_at >= filters.since)
    if filters.until is not None:
        where.append(d.c.created_at < filters.until)
    if cursor is not None:
        where.append(position(d.c.created_at, (d.c.outbox_id, d.c.id), "delivery", cursor, older))
    keys = (d.c.created_at, d.c.outbox_id, d.c.id)
    order = [key.desc() if older else key.asc() for key in keys]
    inner = (
        sa.select(*columns)
        .select_from(d.join(t, t.c.id == d.c.target_id).join(o, o.c.id == d.c.outbox_id))
        .where(*where)
        .order_by(*order)
        .limit(limit)
        .subquery()
    )
    return sa.select(inner)


def shown_target(kind: str | None, url: str | None) -> str | None:
    """A delivery's target as the activity shows it: an email address as it is, a webhook's
    URL without its credentials."""
    if url is None:
        return None
    return url if kind == "email" else shown_url(url)


def shown_error(error: str | None, kind: str | None, url: str | None) -> str | None:
    if error is None or url is None or kind == "email":
        return error
    return scrubbed(error, url)
