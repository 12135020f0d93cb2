"""The demo as a buyer meets it: the paysign service over real HTTP (its own database, the demo
catalog seeded), the sandbox dev chain started by the code ``paysign serve`` uses, and the demo's
facilitator and sellers (the x402 SDK's) beside them. One of each per test session; each test
gets a fresh buyer account with a funded wallet.

Helpers act as an agent does: decode the seller's terms by hand (base64 JSON, or the v1 body),
hand them verbatim to ``POST /wallets/signatures``, and send the returned header to the seller.
"""

from __future__ import annotations

import base64
import copy
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import LiveServer, free_port
from paysign.bootstrap import Runtime, build_runtime
from paysign.catalog.listing import parse_catalog_entries
from paysign.chain.devchain import find_anvil, sandbox_chain
from paysign.chain.testnet import SandboxChain
from paysign.chain.usdc import TRANSFER_TOPIC
from paysign.config import Settings
from paysign.demo.runner import DemoStack
from paysign.demo.sellers import DemoSellers
from paysign.demo.terms import DemoListing, DemoSettings
from paysign.services import accounts, keys, policy
from paysign.services.catalog import demo_catalog, seed_demo_catalog

SANDBOX = {"X-Sandbox-Mode": "true"}


@dataclass
class DemoWorld:
    settings: Settings
    runtime: Runtime
    service: str  # the paysign API, over HTTP
    stack: DemoStack
    chain: SandboxChain
    sandbox_pay_to: str
    live_pay_to: str

    @property
    def sellers(self) -> str:
        return self.stack.sellers_url

    @property
    def sellers_host(self) -> str:
        return urlsplit(self.sellers).netloc


@dataclass
class Buyer:
    email: str
    api_key: str
    wallet: str  # EIP-55


def new_pay_to() -> str:
    from eth_utils.address import to_checksum_address

    return to_checksum_address("0x" + secrets.token_hex(20))


@pytest.fixture(scope="session")
def demo_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoWorld]:
    try:
        find_anvil()
    except Exception as exc:  # no skip: CI must not pass silently without the chain
        pytest.fail(f"{exc}", pytrace=False)
    data_dir = tmp_path_factory.mktemp("demo") / "var"
    base = Settings(
        data_dir=data_dir,
        demo_sellers_url=f"http://127.0.0.1:{free_port()}",
        devchain_dump_interval_seconds=60,
    )
    sandbox_pay_to, live_pay_to = new_pay_to(), new_pay_to()
    demo = DemoSettings(facilitator_port=0, sandbox_pay_to=sandbox_pay_to, live_pay_to=live_pay_to)
    # What `paysign serve` does: the dev chain of the data directory, the runtime, the catalog.
    with sandbox_chain(base) as settings:
        runtime = build_runtime(settings)
        assert seed_demo_catalog(runtime.db, runtime.clock, settings.demo_sellers_url)
        assert runtime.sandbox_chain is not None
        from paysign.app import create_app

        with LiveServer(create_app(runtime)) as server, DemoStack(settings, demo) as stack:
            yield DemoWorld(
                settings,
                runtime,
                server.url,
                stack,
                runtime.sandbox_chain,
                sandbox_pay_to,
                live_pay_to,
            )
        runtime.sandbox_chain.close()
        runtime.db.dispose()


@pytest.fixture
def buyer(demo_world: DemoWorld) -> Buyer:
    """A fresh account with an API key, a wallet holding 1 test USDC, and the Open Ecosystem
    v1 seller on its allow list (Premium and Standard listings need no approval)."""
    rt = demo_world.runtime
    email = f"buyer-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        rt.db, rt.vault, rt.clock, email=email, password="correct horse battery"
    )
    issued = keys.issue_key(rt.db, rt.clock, email=email, expires_in_days=30)
    policy.decide_seller(
        rt.db, rt.clock, email=email, seller=f"{demo_world.sellers_host}/facts", kind="allow"
    )
    wallet = created.wallet_address
    demo_world.chain.send_usdc(address(wallet), 1_000_000)
    return Buyer(email, issued.api_key, wallet)


@pytest.fixture
def seller_without_sandbox(demo_world: DemoWorld) -> Iterator[str]:
    """The demo's sellers built for one listing made for the test, ``company_filings`` with
    ``sandboxAvailable: false`` (every demo listing has a sandbox), paid through the demo's
    facilitator: its URL, ``…/market/v1/filings``."""
    port = free_port()
    (filings,) = [
        entry
        for entry in demo_catalog(f"http://127.0.0.1:{port}")["catalog"]
        if entry["name"] == "company_filings"
    ]
    entry = copy.deepcopy(filings)
    entry.update(sandboxAvailable=False)
    entry["inputs"]["header"] = []
    (listing,) = parse_catalog_entries([entry])
    sellers = DemoSellers(
        [DemoListing(listing, "/market/v1/filings")],
        demo_world.stack.terms,
        demo_world.stack.facilitator_url,
    )
    with LiveServer(sellers.app(), port) as server:
        yield server.url + "/market/v1/filings"


# ---- acting as the agent ----


def address(hex_address: str) -> bytes:
    return bytes.fromhex(hex_address.removeprefix("0x"))


def b64json(value: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(base64.b64decode(value, validate=True))
    return decoded


def payment_required(response: httpx.Response) -> dict[str, Any]:
    """The terms of a 402: the v2 ``PAYMENT-REQUIRED`` header, else the v1 JSON body."""
    assert response.status_code == 402, response.text
    header = response.headers.get("PAYMENT-REQUIRED")
    if header is not None:
        return b64json(header)
    body: dict[str, Any] = response.json()
    assert body["x402Version"] == 1
    return body


def sign(
    world: DemoWorld,
    buyer: Buyer,
    seller_url: str,
    terms: dict[str, Any],
    *,
    sandbox: bool = True,
) -> dict[str, Any]:
    """``POST /wallets/signatures`` with the seller's terms as received."""
    headers = {"Authorization": f"Bearer {buyer.api_key}", **(SANDBOX if sandbox else {})}
    response = httpx.post(
        f"{world.service}/wallets/signatures",
        json={"sellerUrl": seller_url, "paymentRequired": terms},
        headers=headers,
        timeout=10,
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def transfers(world: DemoWorld, sender: str) -> list[dict[str, Any]]:
    """Every USDC ``Transfer`` log from ``sender`` on the chain, oldest first."""
    topic_from = "0x" + bytes(12).hex() + sender.removeprefix("0x").lower()
    logs: list[dict[str, Any]] = world.chain.rpc.request(
        "eth_getLogs",
        [
            {
                "fromBlock": "0x0",
                "toBlock": "latest",
                "address": world.chain.usdc_hex,
                "topics": ["0x" + TRANSFER_TOPIC.hex(), topic_from],
            }
        ],
    )
    return logs


def assert_receipt_pays(
    world: DemoWorld, tx_hash: str, *, payer: str, pay_to: str, amount: int
) -> None:
    """``eth_getTransactionReceipt``: mined, status 1, and exactly one USDC ``Transfer`` log,
    ``from = payer``, ``to = pay_to``, ``value = amount``."""
    receipt = world.chain.rpc.request("eth_getTransactionReceipt", [tx_hash])
    assert receipt is not None, "the transaction is not mined"
    assert int(receipt["status"], 16) == 1
    usdc = world.chain.usdc_hex.lower()
    moved = [
        log
        for log in receipt["logs"]
        if log["address"].lower() == usdc and log["topics"][0] == "0x" + TRANSFER_TOPIC.hex()
    ]
    assert len(moved) == 1, moved
    (log,) = moved
    assert log["topics"][1] == "0x" + bytes(12).hex() + payer.removeprefix("0x").lower()
    assert log["topics"][2] == "0x" + bytes(12).hex() + pay_to.removeprefix("0x").lower()
    assert int(log["data"], 16) == amount


class Balances:
    """USDC balances of some addresses, read now and compared later."""

    def __init__(self, world: DemoWorld, *addresses: str) -> None:
        self.world = world
        self.before = {a: world.chain.usdc_balance(address(a)) for a in addresses}

    def moved(self) -> dict[str, int]:
        return {
            a: self.world.chain.usdc_balance(address(a)) - before
            for a, before in self.before.items()
        }


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
