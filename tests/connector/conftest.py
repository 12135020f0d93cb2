"""The connector as an assistant meets it: the paysign app over a real socket (its own
database, the demo catalog seeded, the dev chain), the demo's facilitator and sellers, and a
fake x402 Bazaar index. One of each per test session; the MCP client is the official SDK's."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import LiveServer, free_port
from paysign.bootstrap import Runtime, build_runtime
from paysign.chain.devchain import find_anvil, sandbox_chain
from paysign.chain.testnet import SandboxChain
from paysign.config import Settings
from paysign.demo.runner import DemoStack
from paysign.demo.terms import DemoSettings
from paysign.services import accounts, keys, policy
from paysign.services.catalog import seed_demo_catalog

Served = LiveServer  # a real uvicorn on 127.0.0.1, optionally on a chosen port


# ---- a fake Bazaar index (reference §4.4): search + browse, in the drifting shapes ----

BAZAAR_ITEMS: list[dict[str, Any]] = [
    {
        "resource": "https://api.weather.example/forecast",
        "type": "http",
        "x402Version": 2,
        "description": "Weather forecast by city",
        "serviceName": "Weather API",
        "tags": ["weather"],
        "accepts": [
            {
                "scheme": "exact",
                "network": "eip155:8453",
                "amount": "1000",
                "payTo": "0x1",
                "asset": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
                "maxTimeoutSeconds": 60,
            }
        ],
        "extensions": {"bazaar": {"info": {"input": {"type": "http", "method": "GET"}}}},
    },
    {
        "resource": "https://api.weather.example/premium",
        "type": "http",
        "x402Version": 2,
        "description": "Premium weather radar",
        "accepts": [{"scheme": "exact", "network": "eip155:8453", "amount": "5000000"}],
    },
    {  # the v1-era shape: url + maxAmountRequired + metadata
        "url": "https://quotes.example/v1/quote",
        "type": "http",
        "metadata": {"description": "Stock quotes"},
        "accepts": [{"scheme": "exact", "network": "base-sepolia", "maxAmountRequired": "2500"}],
    },
    {"resource": "not a url", "accepts": []},
]


def fake_bazaar(*, search: bool) -> Starlette:
    calls: list[str] = []

    async def resources(request: Request) -> JSONResponse:
        calls.append(str(request.url))
        limit = int(request.query_params.get("limit", "100"))
        return JSONResponse(
            {
                "x402Version": 2,
                "items": BAZAAR_ITEMS[:limit],
                "pagination": {"limit": limit, "offset": 0, "total": len(BAZAAR_ITEMS)},
            }
        )

    async def do_search(request: Request) -> JSONResponse:
        calls.append(str(request.url))
        query = request.query_params.get("query")
        if not query:
            return JSONResponse({"error": "query is required"}, status_code=400)
        found = [i for i in BAZAAR_ITEMS if query.lower() in str(i.get("description", "")).lower()]
        return JSONResponse({"x402Version": 2, "resources": found, "partialResults": False})

    routes = [Route("/discovery/resources", resources)]
    if search:
        routes.append(Route("/discovery/search", do_search))
    app = Starlette(routes=routes)
    app.state.calls = calls
    return app


@dataclass
class World:
    settings: Settings
    runtime: Runtime
    service: str
    stack: DemoStack
    chain: SandboxChain
    sandbox_pay_to: str
    bazaar_app: Starlette

    @property
    def mcp_url(self) -> str:
        return self.settings.resolved_mcp_url

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
    wallet: str


def new_pay_to() -> str:
    from eth_utils.address import to_checksum_address

    return to_checksum_address("0x" + secrets.token_hex(20))


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    try:
        find_anvil()
    except Exception as exc:  # no skip: CI must not pass silently without the chain
        pytest.fail(f"{exc}", pytrace=False)
    bazaar_app = fake_bazaar(search=True)
    with Served(bazaar_app) as bazaar:
        port = free_port()
        base = Settings(
            port=port,
            data_dir=tmp_path_factory.mktemp("connector") / "var",
            demo_sellers_url=f"http://127.0.0.1:{free_port()}",
            devchain_dump_interval_seconds=60,
            connector_allow_private=True,
            connector_catalog_poll_seconds=0.2,
            bazaar_url=bazaar.url,
        )
        sandbox_pay_to = new_pay_to()
        demo = DemoSettings(
            facilitator_port=0, sandbox_pay_to=sandbox_pay_to, live_pay_to=new_pay_to()
        )
        with sandbox_chain(base) as settings:
            runtime = build_runtime(settings)
            assert seed_demo_catalog(runtime.db, runtime.clock, settings.demo_sellers_url)
            assert runtime.sandbox_chain is not None
            from paysign.app import create_app

            with (
                Served(create_app(runtime), port) as server,
                DemoStack(settings, demo) as stack,
            ):
                yield World(
                    settings,
                    runtime,
                    server.url,
                    stack,
                    runtime.sandbox_chain,
                    sandbox_pay_to,
                    bazaar_app,
                )
            runtime.sandbox_chain.close()
            runtime.db.dispose()


def make_buyer(world: World, *, allow_facts: bool = True, funds: int = 1_000_000) -> Buyer:
    rt = world.runtime
    email = f"buyer-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        rt.db, rt.vault, rt.clock, email=email, password="correct horse battery"
    )
    issued = keys.issue_key(rt.db, rt.clock, email=email, expires_in_days=30)
    if allow_facts:
        policy.decide_seller(
            rt.db, rt.clock, email=email, seller=f"{world.sellers_host}/facts", kind="allow"
        )
    if funds:
        world.chain.send_usdc(bytes.fromhex(created.wallet_address.removeprefix("0x")), funds)
    return Buyer(email, issued.api_key, created.wallet_address)


@pytest.fixture
def buyer(world: World) -> Buyer:
    return make_buyer(world)


@contextlib.asynccontextmanager
async def connect(
    url: str, api_key: str, *, mode: str = "legacy", **kwargs: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {api_key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client,
    ):
        yield client


def allowed_buyer(world: World, url: str) -> Buyer:
    """A funded buyer whose holder has approved the host of ``url``."""
    buyer = make_buyer(world)
    rt = world.runtime
    host = urlsplit(url).netloc
    policy.decide_seller(rt.db, rt.clock, email=buyer.email, seller=host, kind="allow")
    return buyer


def balance(world: World, address: str) -> int:
    return world.chain.usdc_balance(bytes.fromhex(address.removeprefix("0x")))


def paid_in_sandbox(world: World, buyer: Buyer, url: str) -> dict[str, Any]:
    """``pay_x402`` of ``url`` in sandbox through the MCP SDK's client; its structured result,
    once it is no error."""

    async def scenario() -> types.CallToolResult:
        async with connect(world.mcp_url, buyer.api_key) as client:
            return await client.call_tool("pay_x402", {"url": url, "sandbox": True})

    result = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert not result.is_error, result.content
    return dict(result.structured_content or {})


def replace_settings(runtime: Runtime, **changes: Any) -> Runtime:
    return dataclasses.replace(runtime, settings=runtime.settings.model_copy(update=changes))
