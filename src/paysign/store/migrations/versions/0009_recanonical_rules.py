"""Rules and pending sellers re-written in the canonical seller address.

The canonical address changed: an IPv4-mapped or IPv4-compatible IPv6 host is its IPv4
address (``[::ffff:a00:1]`` is ``10.0.0.1``), a path segment's ``;parameters`` are dropped and
``..;`` is ``..``. Sellers are now matched in that form, so a rule stored in the old one — a
holder's deny on ``[::ffff:a00:1]`` or on ``api.example.com/admin;x=1`` — matched nothing any
more: the deny silently stopped denying. Each stored rule and pending seller is read again
with today's parser and re-written; rows that become the same are merged.

The parsers are the application's own, not a frozen copy: the point is that the stored form
equals the form the running code matches. Should the canonical form change again, that change
brings its own migration; on a database upgraded through both, this one already writes the
newer form and the later one finds nothing to do.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.engine import Connection

from paysign.policy.rules import Rule, candidate_hosts, parse_rule
from paysign.policy.seller import (
    SellerLocation,
    normalise_path,
    seller_location,
    split_host_port,
)

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# The tables as this revision knows them, not as schema.py may declare them later.
_rules = sa.table(
    "policy_rules",
    sa.column("id", sa.BigInteger),
    sa.column("account_id", sa.String),
    sa.column("kind", sa.String),
    sa.column("host", sa.String),
    sa.column("path", sa.String),
)
_pending = sa.table(
    "pending_sellers",
    sa.column("account_id", sa.String),
    sa.column("host", sa.String),
    sa.column("path", sa.String),
    sa.column("first_seen", sa.BigInteger),
    sa.column("last_seen", sa.BigInteger),
    sa.column("refused_count", sa.BigInteger),
    sa.column("pay_to", sa.String),
    sa.column("amount", sa.BigInteger),
    sa.column("network", sa.String),
)


def upgrade() -> None:
    conn = op.get_bind()
    for account_id in _accounts(conn, _rules):
        _recanonicalise_rules(conn, account_id)
    # After the rules: a pending seller that a re-written rule now decides is settled.
    for account_id in _accounts(conn, _pending):
        _recanonicalise_pending(conn, account_id)


def downgrade() -> None:
    """Nothing: the old spellings are not kept, and the new ones are valid rules and pending
    sellers to the code of 0008 too (it reads them as written)."""


def _accounts(conn: Connection, table: Any) -> Iterator[str]:
    """The accounts with rows in ``table``, one index probe each: no list of every account."""
    last: str | None = None
    while True:
        query = sa.select(sa.func.min(table.c.account_id))
        if last is not None:
            query = query.where(table.c.account_id > last)
        last = conn.execute(query).scalar()
        if last is None:
            return
        yield last


def _recanonicalise_rules(conn: Connection, account_id: str) -> None:
    rows = conn.execute(
        sa.select(_rules.c.id, _rules.c.kind, _rules.c.host, _rules.c.path)
        .where(_rules.c.account_id == account_id)
        .order_by(_rules.c.id)
    ).all()
    taken = {(r.kind, r.host, r.path) for r in rows}
    for row in rows:
        try:
            rule = _reparsed(row.host, row.path)
        except ValueError:
            # Left as it is. The new parser refuses it because it holds a part that
            # seller_location now refuses in every URL (a control byte, a segment ending in a
            # dot or a space, a double escape, a path that is not UTF-8, a character no host
            # name has), so any URL the stored rule could match is refused before the policy is
            # asked: a deny loses nothing, an allow grants nothing. Deleting it would drop the
            # holder's rule unseen; kept, it stays on their policy page, and saving the policy
            # names it until they remove it.
            continue
        if (rule.host, rule.path) == (row.host, row.path):
            continue
        taken.discard((row.kind, row.host, row.path))
        # Another row holds the new form already (written so, or moved there first): this one
        # is the same rule twice. A canonical form parses to itself, so that row stays put.
        if (row.kind, rule.host, rule.path) in taken:
            conn.execute(_rules.delete().where(_rules.c.id == row.id))
        else:
            conn.execute(
                _rules.update().where(_rules.c.id == row.id).values(host=rule.host, path=rule.path)
            )
            taken.add((row.kind, rule.host, rule.path))


def _reparsed(host: str, path: str) -> Rule:
    """``parse_rule(str(Rule(host, path)))`` without its length limit: that bounds what a
    holder types, and escaping can make a stored rule's canonical spelling longer than what
    was typed — it is the holder's rule all the same. (The text splits at its first ``/``
    into exactly this host and path.)"""
    return Rule(parse_rule(host).host, normalise_path(path))


def _pending_url(host: str, path: str) -> str:
    # A stored host carries its port unless it was the URL's default; ":443" is only ever
    # stored from an http URL, and under https it would be dropped as a default port.
    scheme = "http" if split_host_port(host)[1] == "443" else "https"
    return f"{scheme}://{host}{path}"


def _recanonicalise_pending(conn: Connection, account_id: str) -> None:
    rows = conn.execute(sa.select(_pending).where(_pending.c.account_id == account_id)).all()
    rules: dict[str, list[Rule]] = {}
    for r in conn.execute(
        sa.select(_rules.c.host, _rules.c.path).where(_rules.c.account_id == account_id)
    ):
        rules.setdefault(r.host, []).append(Rule(r.host, r.path))
    merged: dict[SellerLocation, list[Any]] = {}
    gone: list[Any] = []
    for row in rows:
        try:
            where = seller_location(_pending_url(row.host, row.path))
        except ValueError:
            # No payment to this address can be refused for want of approval any more (its URL
            # is refused first), so the holder has nothing left to decide about it.
            gone.append(row)
            continue
        decided = any(
            rule.matches(where) for host in candidate_hosts(where) for rule in rules.get(host, ())
        )
        # A pending seller is one no rule decides; a re-written rule may now decide it.
        (gone if decided else merged.setdefault(where, [])).append(row)
    for row in gone:
        _delete_pending(conn, account_id, row)
    for where, group in merged.items():
        if len(group) == 1 and (group[0].host, group[0].path) == (where.host, where.path):
            continue
        # An entry from before the terms were kept has none; at an equal time, prefer terms.
        latest = max(group, key=lambda r: (r.last_seen, r.pay_to is not None))
        for row in group:
            _delete_pending(conn, account_id, row)
        conn.execute(
            _pending.insert().values(
                account_id=account_id,
                host=where.host,
                path=where.path,
                first_seen=min(r.first_seen for r in group),
                last_seen=latest.last_seen,
                refused_count=sum(r.refused_count for r in group),
                pay_to=latest.pay_to,
                amount=latest.amount,
                network=latest.network,
            )
        )


def _delete_pending(conn: Connection, account_id: str, row: Any) -> None:
    conn.execute(
        _pending.delete().where(
            _pending.c.account_id == account_id,
            _pending.c.host == row.host,
            _pending.c.path == row.path,
        )
    )
