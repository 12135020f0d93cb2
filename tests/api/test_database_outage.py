"""While the database is unavailable, every surface answers ``503 service-unavailable`` with
``Retry-After`` (never ``500``), records nothing, and serves again once the database is back.

Both faults are real: PostgreSQL is reached through a TCP relay the test cuts (live connections
dropped, new ones refused) and restores; SQLite's signing connection is capped at the pages
its file has (``PRAGMA max_page_count``), so SQLite itself answers "database or disk is full".
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    POSTGRES_URL,
    TEST_MASTER_KEY,
    FrozenClock,
    LiveServer,
    free_port,
    make_database_url,
    new_account,
    signature_body,
)
from paysign.app import create_app
from paysign.bootstrap import Runtime, asset_registry
from paysign.config import Settings
from paysign.custody import EnvelopeVault
from paysign.store.database import Database
from paysign.store.migrate import migrate

AMOUNT = 10_000


class Relay:
    """A TCP forwarder to PostgreSQL on a port of its own; ``cut()`` drops every connection
    and refuses new ones (nothing listens), ``restore()`` listens again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self._acceptor: threading.Thread | None = None

    def restore(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        listener.settimeout(0.05)
        self._listening.set()
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    def cut(self) -> None:
        self._listening.clear()
        if self._acceptor is not None:
            self._acceptor.join()  # the listener is closed: new connections are refused
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while self._listening.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                upstream = socket.create_connection(self.target)
                with self._lock:
                    self._sockets.update((client, upstream))
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def make_runtime(tmp_path: Path, url: str) -> Runtime:
    settings = Settings(data_dir=tmp_path / "var", database_url=url)
    db = Database(url)
    return Runtime(
        settings, db, EnvelopeVault(TEST_MASTER_KEY), FrozenClock(), asset_registry(settings)
    )


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert int(response.headers["retry-after"]) > 0
    problem = response.json()
    assert problem["type"].endswith("/service-unavailable")
    assert problem["status"] == 503
    assert problem["retryAfterSeconds"] == int(response.headers["retry-after"])
    assert "Traceback" not in response.text and "psk_" not in response.text


def eventually(request: Callable[[], httpx.Response], status: int) -> httpx.Response:
    deadline = time.monotonic() + 60
    while True:
        response = request()
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


@pytest.fixture
def relay() -> Iterator[Relay]:
    target = httpx.URL(POSTGRES_URL.replace("postgresql+psycopg", "postgresql"))
    forwarder = Relay((target.host, target.port or 5432))
    forwarder.restore()
    yield forwarder
    forwarder.cut()


@pytest.fixture
def relayed_runtime(tmp_path: Path, relay: Relay) -> Iterator[Runtime]:
    """A runtime on a fresh PostgreSQL schema, reached through ``relay``."""
    direct_url = next(urls := make_database_url("postgresql", tmp_path))
    try:
        direct = Database(direct_url)
        migrate(direct)
        direct.dispose()
        relayed = direct_url.replace("127.0.0.1:5432", f"127.0.0.1:{relay.port}", 1)
        assert relayed != direct_url
        runtime = make_runtime(tmp_path, relayed)
        yield runtime
        runtime.db.dispose()
    finally:
        urls.close()  # drops the schema


def test_postgres_outage_is_503_then_recovers(relayed_runtime: Runtime, relay: Relay) -> None:
    runtime = relayed_runtime
    api_key = new_account(runtime)["api_key"]
    auth = {"Authorization": f"Bearer {api_key}"}
    body = signature_body()
    with (
        LiveServer(create_app(runtime)) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):

        def sign() -> httpx.Response:
            return http.post("/wallets/signatures", json=body, headers=auth)

        assert sign().status_code == 200

        relay.cut()
        assert_unavailable(sign())
        assert_unavailable(sign())  # refused at once now, the same answer
        assert_unavailable(http.get("/buyers/catalog", headers=auth))
        assert_unavailable(http.post("/wallets/testnet/funds", headers=auth))
        mcp = http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**auth, "Accept": "application/json, text/event-stream"},
        )
        assert_unavailable(mcp)
        session = {"Cookie": "paysign_session=" + "s" * 43}  # looked up: the database
        assert_unavailable(http.get("/portal/", headers=session))
        registration = http.post(
            "/oauth/register",
            json={"redirect_uris": ["http://127.0.0.1:9/callback"], "client_name": "x"},
        )
        assert_unavailable(registration)
        not_ready = http.get("/readyz")
        assert not_ready.status_code == 503 and int(not_ready.headers["retry-after"]) > 0

        relay.restore()
        assert eventually(sign, 200).status_code == 200
        assert http.get("/readyz").status_code == 200


def test_the_connector_starts_while_the_database_is_away(
    relayed_runtime: Runtime, relay: Relay
) -> None:
    """The connector reads the catalog's version as it starts; with the database away it
    starts all the same (no MCP request waits forever on it) and its catalog watcher reads
    the version once the database is back."""
    connector = create_app(relayed_runtime).state.connector

    async def scenario() -> None:
        relay.cut()
        await asyncio.wait_for(connector._ensure_started(), timeout=60)
        relay.restore()
        deadline = time.monotonic() + 60
        while True:
            try:
                await connector.check_catalog()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        assert connector._seen_version is not None
        await connector.close()

    asyncio.run(scenario())


def signatures_and_spend(db: Database) -> tuple[int, int]:
    with db.read() as conn:
        rows = conn.exec_driver_sql("SELECT count(*) FROM signatures").scalar_one()
        spent = conn.exec_driver_sql(
            "SELECT coalesce(sum(spent), 0) FROM spend_windows WHERE \"window\" = 'daily'"
        ).scalar_one()
    return int(rows), int(spent)


def test_sqlite_disk_full_is_503_and_records_nothing(tmp_path: Path) -> None:
    url = next(make_database_url("sqlite", tmp_path))
    runtime = make_runtime(tmp_path, url)
    migrate(runtime.db)
    api_key = new_account(runtime)["api_key"]
    auth = {"Authorization": f"Bearer {api_key}"}
    app = create_app(runtime)
    signing_connection: Any = app.state.connector.deps.store._conn
    body = signature_body(amount=str(AMOUNT))
    with (
        LiveServer(app) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):

        def sign() -> httpx.Response:
            return http.post("/wallets/signatures", json=body, headers=auth)

        assert sign().status_code == 200
        # No page beyond those the file has now: the next signature that needs one is refused
        # by SQLite as a full disk.
        pages = signing_connection.execute("PRAGMA page_count").fetchone()[0]
        signing_connection.execute(f"PRAGMA max_page_count={pages}")
        answers = [sign() for _ in range(200)]
        statuses = [answer.status_code for answer in answers]
        assert 503 in statuses and set(statuses) <= {200, 503}, statuses
        assert_unavailable(answers[statuses.index(503)])
        signed = 1 + statuses.count(200)
        # Only what was answered 200 was recorded and spent: nothing of any refused request.
        assert signatures_and_spend(runtime.db) == (signed, signed * AMOUNT)

        signing_connection.execute("PRAGMA max_page_count=1073741823")
        assert sign().status_code == 200
        assert signatures_and_spend(runtime.db) == (signed + 1, (signed + 1) * AMOUNT)
    runtime.db.dispose()
