"""The signing path's catalog lookups (``tier_of``, ``listed_terms``) never wait on the
database: a stale snapshot is refreshed on a thread of its own, one refresh at a time, and the
old snapshot answers meanwhile, whether the database stalls or fails.

The stall is real: PostgreSQL is reached through a relay (``tests/stall_proxy.py``) that stops
forwarding bytes while its connections stay open, as a host dropping packets does.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from structlog.testing import capture_logs

from conftest import PAY_TO, TEST_MASTER_KEY, FrozenClock, LiveServer, make_database_url
from paysign.app import create_app
from paysign.bootstrap import Runtime, asset_registry
from paysign.config import Settings
from paysign.custody import EnvelopeVault
from paysign.policy.decide import Tier
from paysign.policy.seller import seller_location
from paysign.services.catalog import Catalog, demo_catalog, import_catalog, remove_listing
from paysign.store.database import Database
from paysign.store.migrate import migrate
from stall_proxy import StallProxy

SELLERS = "https://sellers.example.com"
QUOTE = seller_location(f"{SELLERS}/market/v1/quote/ACME")  # market_quote, PREMIUM
RECHECK_SECONDS = 0.01
#: How long a test waits for something that should happen at once before it calls it a failure
#: (a deadline against hanging, not a measure of speed).
DEADLINE_SECONDS = 10.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.005)


def make_stale() -> None:
    """Let every snapshot checked before now be older than ``RECHECK_SECONDS``."""
    time.sleep(RECHECK_SECONDS * 3)


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    yield from make_database_url("postgresql", tmp_path)


@pytest.fixture
def direct(postgres_url: str) -> Iterator[Database]:
    """The database as the CLI of another process reaches it: never through the relay."""
    database = Database(postgres_url)
    migrate(database)
    import_catalog(database, FrozenClock(), demo_catalog(SELLERS))
    yield database
    database.dispose()


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[StallProxy]:
    url = sa.engine.make_url(postgres_url)
    with StallProxy((url.host or "127.0.0.1", url.port or 5432)) as relay:
        yield relay


@pytest.fixture
def through_proxy(postgres_url: str, proxy: StallProxy, direct: Database) -> Iterator[Database]:
    database = Database(proxy.url_through(postgres_url))
    yield database
    proxy.resume()
    database.dispose()


def catalog_settings(tmp_path: Path, url: str) -> Settings:
    return Settings(data_dir=tmp_path / "var", database_url=url, catalog_pay_to=PAY_TO)


def catalog_of(db: Database, tmp_path: Path) -> Catalog:
    """A catalog on ``db`` whose snapshot goes stale almost at once."""
    return Catalog(db, catalog_settings(tmp_path, db.url), recheck_seconds=RECHECK_SECONDS)


def test_a_stalled_database_holds_neither_the_lookup_nor_the_event_loop(
    tmp_path: Path, direct: Database, through_proxy: Database, proxy: StallProxy
) -> None:
    catalog = catalog_of(through_proxy, tmp_path)
    answers: dict[str, Any] = {}
    answered = threading.Event()

    async def signing_on_the_loop() -> None:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        try:
            answers["tier"] = catalog.tier_of(QUOTE)
            listed = catalog.listed_terms(QUOTE)
            answers["listed"] = None if listed is None else listed.listing
            answers["refreshing"] = catalog.refreshing
            ticked = ticks
            while ticks < ticked + 100:  # the loop goes on while the refresh waits
                await asyncio.sleep(0)
            answers["still refreshing"] = catalog.refreshing
        finally:
            answered.set()
            ticker.cancel()

    proxy.pause()
    make_stale()
    loop_thread = threading.Thread(target=asyncio.run, args=(signing_on_the_loop(),))
    loop_thread.start()
    try:
        returned = answered.wait(DEADLINE_SECONDS)
        wait_until(lambda: proxy.holding > 0, "the refresh's query to reach the stall")
        # Made while the refresh is stuck: it must show once the database answers again.
        remove_listing(direct, FrozenClock(), "market_quote")
    finally:
        proxy.resume()
        loop_thread.join()
    assert returned, "tier_of held the event loop while the database stalled"
    assert answers == {
        "tier": Tier.PREMIUM,
        "listed": "market_quote",
        "refreshing": True,
        "still refreshing": True,
    }

    wait_until(lambda: catalog.tier_of(QUOTE) is Tier.OPEN_ECOSYSTEM, "the removal to show")
    wait_until(lambda: catalog.listed_terms(QUOTE) is None, "the removal to show")
    wait_until(lambda: not catalog.refreshing, "the last refresh to end")


def test_a_failed_refresh_keeps_the_old_snapshot_and_a_later_one_succeeds(
    tmp_path: Path, direct: Database, through_proxy: Database, proxy: StallProxy
) -> None:
    catalog = catalog_of(through_proxy, tmp_path)
    proxy.refuse()
    remove_listing(direct, FrozenClock(), "market_quote")
    with capture_logs() as records:
        for _ in range(3):  # each one after the failed one is retried at the next recheck
            make_stale()
            assert catalog.tier_of(QUOTE) is Tier.PREMIUM
            assert catalog.listed_terms(QUOTE) is not None
            wait_until(lambda: not catalog.refreshing, "the refresh to fail")
    failures = [r for r in records if r["event"] == "catalog_refresh_failed"]
    assert len(failures) == 3
    assert all(set(r) == {"event", "log_level", "error"} for r in failures)
    assert {r["error"] for r in failures} == {"OperationalError"}
    assert catalog.tier_of(QUOTE) is Tier.PREMIUM

    proxy.resume()
    wait_until(lambda: catalog.tier_of(QUOTE) is Tier.OPEN_ECOSYSTEM, "a refresh to succeed")
    assert catalog.listed_terms(QUOTE) is None
    wait_until(lambda: not catalog.refreshing, "the last refresh to end")


def hold_loads(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], threading.Event]:
    """Every load of ``catalog`` recorded (the version it starts from) and held until the
    event returned is set."""
    loads: list[int] = []
    release = threading.Event()
    load = catalog._load

    def held_load(version: int) -> Any:
        loads.append(version)
        assert release.wait(DEADLINE_SECONDS)
        return load(version)

    monkeypatch.setattr(catalog, "_load", held_load)
    return loads, release


def test_many_stale_lookups_start_one_refresh(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_catalog(runtime.db, runtime.clock, demo_catalog(SELLERS))
    catalog = Catalog(runtime.db, runtime.settings, recheck_seconds=RECHECK_SECONDS)
    loads, release = hold_loads(catalog, monkeypatch)
    remove_listing(runtime.db, runtime.clock, "market_quote")
    make_stale()

    def lookups(_: int) -> list[object]:
        return [catalog.tier_of(QUOTE), catalog.listed_terms(QUOTE) is not None]

    try:
        with ThreadPoolExecutor(16) as callers:
            answers = list(callers.map(lookups, range(200)))
        assert answers == [[Tier.PREMIUM, True]] * 200
        wait_until(lambda: len(loads) > 0, "the refresh to start")
        assert catalog.refreshing
        assert len(loads) == 1
    finally:
        release.set()
    wait_until(lambda: not catalog.refreshing, "the refresh to end")
    assert len(loads) == 1
    assert catalog.tier_of(QUOTE) is Tier.OPEN_ECOSYSTEM
    wait_until(lambda: not catalog.refreshing, "the last refresh to end")


def test_a_catalog_document_waits_for_a_stalled_database_off_the_event_loop(
    tmp_path: Path, through_proxy: Database, proxy: StallProxy
) -> None:
    settings = catalog_settings(tmp_path, through_proxy.url)
    vault = EnvelopeVault(TEST_MASTER_KEY)
    runtime = Runtime(settings, through_proxy, vault, FrozenClock(), asset_registry(settings))
    with (
        LiveServer(create_app(runtime)) as server,
        httpx.Client(base_url=server.url, timeout=DEADLINE_SECONDS) as first,
        httpx.Client(base_url=server.url, timeout=DEADLINE_SECONDS) as second,
        ThreadPoolExecutor(1) as background,
    ):
        assert first.get("/catalog").status_code == 200
        proxy.pause()
        try:
            stalled = background.submit(first.get, "/catalog")
            wait_until(lambda: proxy.holding > 0, "the catalog's query to reach the stall")
            # Served by the same event loop while the catalog's version query is stuck.
            assert second.get("/healthz").status_code == 200
            assert not stalled.done()
        finally:
            proxy.resume()
        document = stalled.result(DEADLINE_SECONDS)
        assert document.status_code == 200
        assert {x["name"] for x in document.json()["catalog"]} >= {"market_quote"}


def test_disposing_the_database_waits_for_the_refresh_and_starts_no_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'paysign.db'}")
    migrate(db)
    catalog = catalog_of(db, tmp_path)
    loads, release = hold_loads(catalog, monkeypatch)
    make_stale()
    catalog.tier_of(QUOTE)
    wait_until(lambda: len(loads) == 1, "the refresh to start")
    disposing = threading.Thread(target=db.dispose)
    disposing.start()
    try:
        disposing.join(0.2)
        assert disposing.is_alive(), "the database was disposed under a refresh"
    finally:
        release.set()
    disposing.join()
    assert not catalog.refreshing
    make_stale()
    catalog.tier_of(QUOTE)
    assert not catalog.refreshing and len(loads) == 1
