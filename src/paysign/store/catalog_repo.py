"""Listings and the catalog's version stamp."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from paysign.catalog.listing import Listing, parse_listing
from paysign.store.schema import catalog_state, listings


def catalog_version(conn: Connection) -> int:
    version = conn.execute(
        sa.select(catalog_state.c.version).where(catalog_state.c.id == 1)
    ).scalar_one_or_none()
    return int(version or 0)


def all_listings(conn: Connection) -> list[Listing]:
    rows = conn.execute(sa.select(listings.c.document).order_by(listings.c.name)).all()
    return [parse_listing(orjson.loads(row.document), i) for i, row in enumerate(rows)]


def upsert_listings(conn: Connection, new: Sequence[Listing], now: int) -> tuple[int, int]:
    """Insert or replace by id; (inserted, updated). A name held by a listing not in ``new``
    passes to the new one: the file being imported is the truth about names."""
    ids = [listing.id for listing in new]
    existing = {
        row.id for row in conn.execute(sa.select(listings.c.id).where(listings.c.id.in_(ids)))
    }
    # Delete, then insert: renames and swapped names never collide half-way.
    conn.execute(
        listings.delete().where(
            sa.or_(listings.c.id.in_(ids), listings.c.name.in_([x.name for x in new]))
        )
    )
    if new:
        conn.execute(
            listings.insert(),
            [
                {
                    "id": listing.id,
                    "name": listing.name,
                    "tier": listing.tier.value,
                    "url": listing.url,
                    "path": listing.path,
                    "document": orjson.dumps(listing.document).decode(),
                    "updated_at": now,
                }
                for listing in new
            ],
        )
    _bump_version(conn, now)
    return len(new) - len(existing), len(existing)


def remove_listings_except(conn: Connection, keep_ids: Sequence[str], now: int) -> list[str]:
    """Delete every listing whose id is not in ``keep_ids``; the names removed, sorted."""
    gone = sorted(
        row.name
        for row in conn.execute(
            sa.select(listings.c.name).where(listings.c.id.not_in(list(keep_ids)))
        )
    )
    if gone:
        conn.execute(listings.delete().where(listings.c.id.not_in(list(keep_ids))))
        _bump_version(conn, now)
    return gone


def remove_listing(conn: Connection, name: str, now: int) -> bool:
    """Delete the listing called ``name``; False when there is none."""
    removed = conn.execute(listings.delete().where(listings.c.name == name)).rowcount
    if removed:
        _bump_version(conn, now)
    return bool(removed)


def _bump_version(conn: Connection, now: int) -> None:
    changed = conn.execute(
        catalog_state.update()
        .where(catalog_state.c.id == 1)
        .values(version=catalog_state.c.version + 1, updated_at=now)
    ).rowcount
    if changed == 0:
        conn.execute(catalog_state.insert().values(id=1, version=1, updated_at=now))
