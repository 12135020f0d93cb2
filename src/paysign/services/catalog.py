"""The catalog: importing listings, serving its documents, and telling the policy a seller's tier.

Documents are rendered once per catalog version and served as bytes with an ETag; every
process checks the version stamp, so an import through the CLI reaches every server.

The signing path asks for tiers on the event loop, so its version checks run on a thread of
their own: a database host that stalls (drops packets) would otherwise hold every request of
the process until the connection timed out, not just the one that happened to check.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson
import structlog

from paysign.catalog.documents import PaymentDetails, catalog_document
from paysign.catalog.listing import Listing, parse_catalog_entries
from paysign.catalog.match import ListingIndex
from paysign.clock import Clock
from paysign.config import Settings
from paysign.errors import InvalidCatalog, ListingNotFound
from paysign.policy.decide import Tier
from paysign.policy.listed_terms import ListedTerms
from paysign.policy.seller import SellerLocation
from paysign.protocol.networks import parse_address
from paysign.store import catalog_repo
from paysign.store.database import Database

log = structlog.get_logger("paysign.catalog")

#: How long disposing the database waits for a refresh under way (one stalled on a dead host
#: is left behind: it is a daemon thread).
REFRESH_DRAIN_SECONDS = 2.0


def import_catalog(
    db: Database, clock: Clock, document: object, *, prune: bool = False
) -> dict[str, Any]:
    """Validate every listing, then upsert them all in one transaction (or none). ``prune``:
    the document is the whole catalog, and listings not in it (by id) are removed in the same
    transaction; the answer then names them."""
    entries = document.get("catalog") if isinstance(document, dict) else document
    if isinstance(document, dict) and "catalog" not in document:
        raise InvalidCatalog("/catalog", "is required (the array of listings)")
    listings = parse_catalog_entries(entries)
    now = clock.now()
    removed: list[str] = []
    with db.write() as conn:
        inserted, updated = catalog_repo.upsert_listings(conn, listings, now)
        if prune:
            removed = catalog_repo.remove_listings_except(conn, [x.id for x in listings], now)
    answer: dict[str, Any] = {"inserted": inserted, "updated": updated}
    if prune:
        answer["removed"] = removed
    return answer


def remove_listing(db: Database, clock: Clock, name: str) -> dict[str, str]:
    """Remove the listing called ``name`` (its connector tool goes with it);
    ``ListingNotFound`` when there is none."""
    with db.write() as conn:
        if not catalog_repo.remove_listing(conn, name, clock.now()):
            raise ListingNotFound(f"no listing is called {name!r} (paysign catalog list)")
    return {"removed": name}


def demo_catalog(sellers_url: str) -> dict[str, Any]:
    text = resources.files("paysign.catalog").joinpath("data/demo_catalog.json").read_text()
    loaded: dict[str, Any] = orjson.loads(text.replace("{sellers}", sellers_url.rstrip("/")))
    return loaded


def seed_demo_catalog(db: Database, clock: Clock, sellers_url: str) -> bool:
    """Import the demo catalog when the catalog has never been written (``paysign demo``'s
    first start; ``paysign serve`` never seeds: a production catalog starts empty)."""
    with db.read() as conn:
        if catalog_repo.catalog_version(conn) != 0:
            return False
    import_catalog(db, clock, demo_catalog(sellers_url))
    return True


def payment_details(settings: Settings) -> tuple[list[PaymentDetails], list[PaymentDetails]]:
    """How the catalog's listings are paid; none until the operator says whom
    (``PAYSIGN_CATALOG_PAY_TO``): no address is a safe guess for real money."""
    if not settings.catalog_pay_to:
        return [], []
    live = PaymentDetails(
        "eip155:8453",
        settings.usdc_mainnet,
        settings.catalog_pay_to,
        settings.catalog_max_timeout_seconds,
        settings.usdc_mainnet_name,
        settings.usdc_version,
    )
    sandbox = PaymentDetails(
        "eip155:84532",
        settings.usdc_testnet,
        settings.catalog_pay_to,
        settings.catalog_max_timeout_seconds,
        settings.usdc_testnet_name,
        settings.usdc_version,
    )
    return [live], [sandbox]


@dataclass(frozen=True, slots=True)
class RenderedDocument:
    body: bytes
    etag: str


@dataclass(frozen=True, slots=True)
class CatalogSnapshot:
    version: int
    listings: tuple[Listing, ...]
    public: RenderedDocument
    full: RenderedDocument
    index: ListingIndex


def _rendered(document: dict[str, Any]) -> RenderedDocument:
    body = orjson.dumps(document)
    return RenderedDocument(body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


class Catalog:
    """The current catalog of this process, refreshed when the stored version changes.

    ``current()`` checks the version now, on the caller's thread (a thread, never the event
    loop). ``tier_of`` and ``listed_terms`` (the signing path) never wait on the database: once
    the snapshot is ``recheck_seconds`` old they start one background refresh and answer from
    the snapshot they have; the refresh swaps its result in when it is done.
    """

    def __init__(self, db: Database, settings: Settings, *, recheck_seconds: float = 2.0):
        self._db = db
        self._live, self._sandbox = payment_details(settings)
        self._payees = {d.network: parse_address(d.pay_to) for d in (*self._live, *self._sandbox)}
        self._listed: dict[tuple[int, str], ListedTerms] = {}
        self._recheck = recheck_seconds
        # Serialises loads and their swap, so an older load never replaces a newer snapshot;
        # only threads take it (current() and the refresher), never the signing path.
        self._load_lock = threading.Lock()
        # Guards only the flag below: held for no I/O, so the signing path may take it.
        self._refresh_flag_lock = threading.Lock()
        self._refreshing = False
        self._refresher: threading.Thread | None = None
        self._disposed = False
        self._snapshot = self._load(version=-1)
        self._checked_at = time.monotonic()
        db.on_dispose(self._stop_refreshing)

    def _load(self, version: int) -> CatalogSnapshot:
        with self._db.read() as conn:
            current = catalog_repo.catalog_version(conn)
            if current == version:
                return self._snapshot
            listings = tuple(catalog_repo.all_listings(conn))
        return CatalogSnapshot(
            current,
            listings,
            _rendered(catalog_document(listings, live=self._live, sandbox=self._sandbox)),
            _rendered(
                catalog_document(
                    listings, live=self._live, sandbox=self._sandbox, tiers=frozenset(Tier)
                )
            ),
            ListingIndex((x.id, x.url, x.path, x.tier) for x in listings),
        )

    def current(self) -> CatalogSnapshot:
        """The up-to-date snapshot (one cheap version query, on the caller's thread: call it
        from a thread, never from the event loop)."""
        with self._load_lock:
            self._snapshot = self._load(self._snapshot.version)
            self._checked_at = time.monotonic()
            return self._snapshot

    @property
    def refreshing(self) -> bool:
        """Whether a background refresh is running."""
        return self._refreshing

    def _fresh_enough(self) -> CatalogSnapshot:
        """The snapshot to answer with now; starts a background refresh when it is stale."""
        if time.monotonic() - self._checked_at > self._recheck and not self._refreshing:
            self._start_refresh()
        return self._snapshot

    def _start_refresh(self) -> None:
        with self._refresh_flag_lock:
            if self._refreshing or self._disposed:
                return
            # A daemon thread: one stalled on a dead host must not hold the process at exit.
            refresher = threading.Thread(
                target=self._refresh_in_background, name="paysign-catalog-refresh", daemon=True
            )
            self._refreshing = True
            try:
                refresher.start()
            except RuntimeError:  # no thread to be had (interpreter exiting): next check
                self._refreshing = False
                return
            self._refresher = refresher

    def _refresh_in_background(self) -> None:
        try:
            self.current()
        except Exception as exc:  # the database is away: keep serving, retry at the next check
            self._checked_at = time.monotonic()
            # The type only: a driver's message may quote connection details or values.
            log.warning("catalog_refresh_failed", error=type(exc).__name__)
        finally:
            self._refreshing = False

    def _stop_refreshing(self) -> None:
        """The database is being disposed: no refresh starts any more, and one under way is
        given a moment to end rather than read from connections (or a schema) going away."""
        with self._refresh_flag_lock:
            self._disposed = True
            refresher = self._refresher
        if refresher is not None:
            refresher.join(REFRESH_DRAIN_SECONDS)

    def tier_of(self, where: SellerLocation) -> Tier:
        return self._fresh_enough().index.tier_of(where)

    def listed_terms(self, where: SellerLocation) -> ListedTerms | None:
        """What the listing at ``where`` publishes about its payment, or ``None`` for an
        unlisted seller; no query, like ``tier_of`` (the signing path asks it every time)."""
        snapshot = self._fresh_enough()
        found = snapshot.index.match(where)
        if found is None:
            return None
        key = (snapshot.version, found.listing_id)
        listed = self._listed.get(key)
        if listed is None:
            if len(self._listed) > 10_000:  # listings of older versions
                self._listed.clear()
            listing = next(x for x in snapshot.listings if x.id == found.listing_id)
            listed = ListedTerms(listing.name, listing.price_base_units, self._payees)
            self._listed[key] = listed
        return listed

    def listing_for(self, where: SellerLocation) -> Listing | None:
        snapshot = self.current()
        found = snapshot.index.match(where)
        if found is None:
            return None
        return next(x for x in snapshot.listings if x.id == found.listing_id)
