"""Shared fixtures: a real database (SQLite file and PostgreSQL schema), a frozen clock,
a runtime wired like production, and the service over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import uvicorn

from paysign.bootstrap import Runtime, asset_registry
from paysign.config import Settings
from paysign.custody import EnvelopeVault
from paysign.protocol import AssetRegistry
from paysign.serving.bounded_head import BoundedHeadProtocol
from paysign.store.database import Database, normalise_url
from paysign.store.migrate import migrate
from paysign.store.signing_store import SigningStore, signing_store_for

POSTGRES_URL = os.environ.get(
    "PAYSIGN_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
TEST_MASTER_KEY = secrets.token_bytes(32)
#: Appended to a test PostgreSQL URL (whose ``options`` set its schema): commits not flushed,
#: what an operator chasing latency might set in the URL (or by ``ALTER ROLE ... SET``).
NOT_DURABLE_URL_OPTION = "%20-csynchronous_commit%3Doff"


class FrozenClock:
    def __init__(self, now: int = 1_790_000_000) -> None:
        self.current = now

    def now(self) -> int:
        return self.current

    def advance(self, seconds: int) -> None:
        self.current += seconds


def _postgres_schema_url(schema: str) -> str:
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{normalise_url(POSTGRES_URL)}{sep}options=-csearch_path%3D{schema}"


def make_database_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of the given kind; dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'paysign.db'}"
        return
    schema = f"t_{secrets.token_hex(6)}"
    admin = sa.create_engine(normalise_url(POSTGRES_URL))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield _postgres_schema_url(schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from make_database_url(request.param, tmp_path)


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    migrate(database)
    yield database
    database.dispose()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(data_dir=tmp_path / "var", database_url=database_url)


@pytest.fixture
def runtime(settings: Settings, db: Database, clock: FrozenClock) -> Runtime:
    return Runtime(settings, db, EnvelopeVault(TEST_MASTER_KEY), clock, asset_registry(settings))


@pytest.fixture
def signing_store(runtime: Runtime) -> Iterator[SigningStore]:
    store = signing_store_for(runtime.db)
    yield store
    store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """The ASGI app served by uvicorn in a thread: real sockets, real HTTP."""

    def __init__(
        self, app: object, port: int | None = None, *, trusted_proxies: tuple[str, ...] = ()
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_config=None,
            access_log=False,
            lifespan="off",
            http=BoundedHeadProtocol,  # as `paysign serve`
            # As `paysign serve`: no proxy is trusted unless named (PAYSIGN_TRUSTED_PROXIES).
            proxy_headers=bool(trusted_proxies),
            forwarded_allow_ips=list(trusted_proxies),
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def live_server(runtime: Runtime) -> Iterator[LiveServer]:
    from paysign.app import create_app

    with LiveServer(create_app(runtime)) as server:
        yield server


@pytest.fixture
def http(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=10) as client:
        yield client


PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
USDC = {
    "eip155:8453": ("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "USD Coin"),
    "eip155:84532": ("0x036CbD53842c5426634e7929541eC2318f3dCF7e", "USDC"),
}
ALIASES = {"base": "eip155:8453", "base-sepolia": "eip155:84532"}
#: The asset registry of the default settings, for tests that need no runtime.
REGISTRY = AssetRegistry.from_addresses(
    mainnet=USDC["eip155:8453"][0],
    mainnet_name=USDC["eip155:8453"][1],
    testnet=USDC["eip155:84532"][0],
    testnet_name=USDC["eip155:84532"][1],
    version="2",
)


def signature_body(
    *,
    network: str = "eip155:84532",
    amount: str = "10000",
    version: int = 2,
    max_timeout: int = 60,
    seller_url: str = "https://api.example.com/weather?city=paris",
) -> dict[str, object]:
    """A signature request as an agent would send it, from a seller's 402."""
    asset, name = USDC[ALIASES.get(network, network)]
    entry: dict[str, object] = {
        "scheme": "exact",
        "network": network,
        "asset": asset,
        "payTo": PAY_TO,
        "maxTimeoutSeconds": max_timeout,
        "extra": {"name": name, "version": "2"},
    }
    if version == 1:
        entry["maxAmountRequired"] = amount
        entry["resource"] = seller_url
        entry["description"] = "weather"
        return {"sellerUrl": seller_url, "paymentRequired": {"x402Version": 1, "accepts": [entry]}}
    entry["amount"] = amount
    return {
        "sellerUrl": seller_url,
        "paymentRequired": {
            "x402Version": 2,
            "resource": {
                "url": seller_url,
                "description": "weather",
                "mimeType": "application/json",
            },
            "accepts": [entry],
        },
    }


@pytest.fixture
def account(runtime: Runtime) -> dict[str, str]:
    """A fresh account with an active API key."""
    return new_account(runtime)


def new_account(runtime: Runtime) -> dict[str, str]:
    """An account with an active API key that may pay ``api.example.com``."""
    from paysign.services import accounts, keys, policy

    email = f"agent-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email=email, password="correct horse battery"
    )
    issued = keys.issue_key(runtime.db, runtime.clock, email=email, expires_in_days=30)
    policy.decide_seller(
        runtime.db, runtime.clock, email=email, seller="api.example.com", kind="allow"
    )
    return {
        "email": email,
        "account_id": created.account_id,
        "wallet": created.wallet_address,
        "api_key": issued.api_key,
    }


# --- real processes -------------------------------------------------------------------------

PAYSIGN = str(Path(sys.executable).with_name("paysign"))


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    """Environment for ``paysign`` processes sharing this test's database."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    environment["PAYSIGN_DATA_DIR"] = str(tmp_path / "var")
    if not database_url.startswith("sqlite"):
        environment["PAYSIGN_DATABASE_URL"] = database_url
    return environment


def paysign(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PAYSIGN, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        input=stdin,
    )


def ok_json(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


class ServeProcess:
    """``paysign serve`` as a child process; its log is checked for secrets on exit."""

    def __init__(
        self, env: dict[str, str], *args: str, port: int | None = None, start_within: float = 30
    ) -> None:
        """``args``: more ``serve`` options (``--workers 2``)."""
        self.env = env
        self.args = args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.start_within = start_within

    def __enter__(self) -> str:
        # A file, not a pipe: a busy server must never block on a full pipe buffer.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [PAYSIGN, "serve", "--host", "127.0.0.1", "--port", str(self.port), *self.args],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self.start_within
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self.url
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"server did not start: {self.output().decode()[-2000:]}")
            time.sleep(0.1)

    def output(self) -> bytes:
        self.log.seek(0)
        return self.log.read()

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)
        stderr = self.output()
        self.log.close()
        # Nothing secret ever reaches the log: no API key, no TOTP secret, no signature.
        assert b"psk_" not in stderr
        assert b"totp" not in stderr.lower()
        assert b"paymentSignatureHeader" not in stderr
        errors = [line for line in stderr.decode().splitlines() if "unhandled_error" in line]
        assert not errors, "\n".join(errors[:3])


# --- the real sandbox chain -----------------------------------------------------------------


@pytest.fixture(scope="session")
def dev_chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One anvil dev chain (chain id 84532, test USDC at Base Sepolia's address) per run."""
    from paysign.chain.devchain import Devchain

    with Devchain(tmp_path_factory.mktemp("session-devchain"), dump_interval=60) as chain:
        yield chain


@pytest.fixture(scope="session")
def sandbox_chain(dev_chain: object) -> Iterator[object]:
    from paysign.chain.devchain import USDC_ADDRESS
    from paysign.chain.testnet import SandboxChain

    chain = SandboxChain(
        dev_chain.rpc_url,  # type: ignore[attr-defined]
        usdc=USDC_ADDRESS,
        treasury_key=dev_chain.treasury_key,  # type: ignore[attr-defined]
        lock_path=dev_chain.data_dir / "testnet-treasury.lock",  # type: ignore[attr-defined]
    )
    yield chain
    chain.close()


@pytest.fixture
def chained_runtime(runtime: Runtime, sandbox_chain: object) -> Runtime:
    """The runtime with the sandbox chain attached, as ``paysign serve`` builds it."""
    import dataclasses

    return dataclasses.replace(runtime, sandbox_chain=sandbox_chain)


#: The digits 0-9 of other scripts (Arabic-Indic, Persian, full-width, superscript): digits to
#: ``str.isdigit``, but never in a code an authenticator shows or a number a URL holds.
OTHER_SCRIPTS_DIGITS = [
    "".join(chr(first + i) for i in range(10)) for first in (0x660, 0x6F0, 0xFF10)
] + ["\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"]


def in_other_digits(code: str) -> list[str]:
    """``code`` written in each of ``OTHER_SCRIPTS_DIGITS``."""
    return [code.translate(str.maketrans("0123456789", digits)) for digits in OTHER_SCRIPTS_DIGITS]


def migrate_to(db: Database, revision: str) -> None:
    """Bring the schema to ``revision`` (``"head"``: the newest), as an upgrade from an older
    paysign would: for tests of what a migration does to rows stored before it."""
    from alembic import command
    from alembic.config import Config

    from paysign.store.migrate import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with db.writer.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        conn.commit()
