"""The buyer's world, all real: the paysign app over HTTP (its own SQLite database per test, the
clock at real time so signatures are valid on chain), the anvil dev chain, and sellers built
with the official x402 SDK — its FastAPI payment middleware for x402 v2, its v1 models for a
v1 seller — checked and settled by the SDK's own facilitator (``x402FacilitatorSync`` with the
exact EVM schemes and ``FacilitatorWeb3Signer`` on the dev chain, anvil account 3).

The sellers (one app, one server per session), by path:

=================================  =====================================================
``GET /v2/weather/{city}``         v2, 0.01 USDC on Base Sepolia
``POST /v2/echo``                  v2, 0.002 USDC; answers the JSON body it got
``GET /v2/mixed``                  v2, two options: 2 USDC on Base mainnet first, then
                                   0.02 USDC on Base Sepolia
``GET /v2/expensive``              v2, 5 USDC on Base Sepolia
``GET /v2/wrong-domain``           v2, Base Sepolia USDC with the mainnet EIP-712 name
``GET /v2/cheaper-elsewhere``      v2, three Base Sepolia options: 0.001 USDC with the
                                   mainnet EIP-712 name, then 0.03 and 0.012 USDC
``GET /v2/other-token``            v2, a token that is not USDC
``GET /v1/fact``                   x402 v1 (JSON 402 body, ``X-PAYMENT``), 0.003 USDC
``GET /drop-before/weather/{c}``   as /v2/weather, but the first paid request is cut off
                                   before the seller sees it
``GET /drop-after/weather/{c}``    as /v2/weather, but the answer to the first paid
                                   request is cut off after the seller settled
``GET /drop-always/weather/{c}``   every paid request is cut off; maxTimeoutSeconds 8
``GET /market/v1/quote/{symbol}``  the catalog's ``test_quote`` (v2, 0.01 USDC)
``POST /language/v1/translate``    the catalog's ``test_translate`` (v2, 0.003 USDC)
``GET /free``                      no payment
``GET /hostile/{b}/weather/{c}``   as /v2/weather, with the seller's side abused
                                   (``hostile_seller.py``: endless or dripped 402s,
                                   huge paid answers, lying receipts)
=================================  =====================================================
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from eth_utils.address import to_checksum_address
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from x402 import x402FacilitatorSync, x402ResourceServer
from x402.http import PaymentOption, RouteConfig
from x402.http.middleware.fastapi import payment_middleware
from x402.http.utils import decode_payment_signature_header, encode_payment_response_header
from x402.mechanisms.evm import FacilitatorWeb3Signer
from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme, ExactEvmServerScheme
from x402.mechanisms.evm.exact.v1.facilitator import ExactEvmSchemeV1
from x402.schemas import AssetAmount, SupportedResponse
from x402.schemas.v1 import PaymentPayloadV1, PaymentRequiredV1, PaymentRequirementsV1

from conftest import FrozenClock, LiveServer
from paysign.chain.devchain import ANVIL_DEV_KEYS
from paysign.chain.usdc import TRANSFER_TOPIC
from paysign.config import BASE_MAINNET_USDC, BASE_SEPOLIA_USDC
from paysign.services import activity, policy
from paysign.services.catalog import import_catalog

from .hostile_seller import HostileSeller

TESTNET, MAINNET = "eip155:84532", "eip155:8453"
TESTNET_EXTRA = {"name": "USDC", "version": "2"}
MAINNET_EXTRA = {"name": "USD Coin", "version": "2"}
MAX_TIMEOUT = 60
SHORT_TIMEOUT = 8  # signatures for /drop-always/ live 8 s: retried for about 2 s
PRICES = {
    "weather": 10_000,
    "echo": 2_000,
    "mixed_mainnet": 2_000_000,
    "mixed_testnet": 20_000,
    "expensive": 5_000_000,
    "fact": 3_000,
    "quote": 10_000,
    "translate": 3_000,
    "wrong_domain": 1_000,
    "dearer": 30_000,
    "cheapest_usable": 12_000,
}


# ---- the paysign side: SQLite only, the clock at real time ---------------------------------


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """The client does not care which database the service uses: SQLite keeps this quick."""
    yield f"sqlite:///{tmp_path / 'paysign.db'}"


@pytest.fixture
def clock() -> FrozenClock:
    """Frozen at the real time: the signatures' validBefore must be in the chain's future."""
    return FrozenClock(int(time.time()))


# ---- the facilitator: the SDK's own, in process ----------------------------------------------


class MainnetVerifyOnlySigner:
    """A ``FacilitatorEvmSigner`` with no chain: mainnet terms can be quoted, never settled."""

    def __init__(self, address: str) -> None:
        self.address = address

    def get_addresses(self) -> list[str]:
        return [self.address]

    def get_code(self, address: str) -> bytes:
        return b"\x60\x00" if address.lower() == BASE_MAINNET_USDC.lower() else b""

    def read_contract(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no mainnet here ({name})")


class InProcessFacilitator:
    """An SDK ``x402FacilitatorSync`` as the SDK's resource server calls a facilitator client."""

    def __init__(self, facilitator: x402FacilitatorSync) -> None:
        self.facilitator = facilitator

    async def verify(self, payload: Any, requirements: Any) -> Any:
        return await asyncio.to_thread(self.facilitator.verify, payload, requirements)

    async def settle(self, payload: Any, requirements: Any) -> Any:
        return await asyncio.to_thread(self.facilitator.settle, payload, requirements)

    def get_supported(self) -> SupportedResponse:
        return self.facilitator.get_supported()


# ---- the sellers -----------------------------------------------------------------------------


@dataclass
class Sellers:
    url: str
    pay_to: str  # EIP-55
    #: (path, payment header) of every paid request that reached the sellers' front door.
    paid_requests: list[tuple[str, str]] = field(default_factory=list)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def paid_headers(self, path_prefix: str) -> list[str]:
        return [h for p, h in self.paid_requests if p.startswith(path_prefix)]


class CutOffFirstPaid:
    """ASGI, in front of the sellers: records paid requests, and cuts the connection of the
    first paid request to ``/drop-before/`` (before the seller sees it) and ``/drop-after/``
    (after the seller verified, served and settled it) — status line sent, body never."""

    def __init__(self, app: Any, sellers: Sellers) -> None:
        self.app = app
        self.sellers = sellers
        self.cut: set[bytes] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            paid = headers.get(b"payment-signature") or headers.get(b"x-payment")
            path: str = scope["path"]
            if paid is not None:
                self.sellers.paid_requests.append((path, paid.decode()))
            if paid is not None and (
                path.startswith("/drop-always/")
                or (path.startswith(("/drop-before/", "/drop-after/")) and paid not in self.cut)
            ):
                self.cut.add(paid)
                if path.startswith("/drop-after/"):
                    answer: list[Any] = []

                    async def keep(message: Any) -> None:
                        answer.append(message)

                    await self.app(scope, receive, keep)
                    assert answer[0]["status"] == 200, answer
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [(b"content-length", b"100")],
                    }
                )
                raise ConnectionAbortedError("the answer is lost on purpose")
        await self.app(scope, receive, send)


def _option(
    price: int,
    *,
    network: str = TESTNET,
    asset: str = BASE_SEPOLIA_USDC,
    extra: dict[str, str] | None = None,
    pay_to: str,
    max_timeout: int = MAX_TIMEOUT,
) -> PaymentOption:
    return PaymentOption(
        scheme="exact",
        pay_to=pay_to,
        price=AssetAmount(
            amount=str(price),
            asset=asset,
            extra=dict(extra if extra is not None else TESTNET_EXTRA),
        ),
        network=network,
        max_timeout_seconds=max_timeout,
    )


def _routes(pay_to: str) -> dict[str, RouteConfig]:
    weather = RouteConfig(accepts=_option(PRICES["weather"], pay_to=pay_to), description="weather")
    return {
        "GET /v2/weather/[city]": weather,
        "GET /drop-before/weather/[city]": weather,
        "GET /drop-after/weather/[city]": weather,
        "GET /drop-always/weather/[city]": RouteConfig(
            accepts=_option(PRICES["weather"], pay_to=pay_to, max_timeout=SHORT_TIMEOUT)
        ),
        "POST /v2/echo": RouteConfig(accepts=_option(PRICES["echo"], pay_to=pay_to)),
        "GET /v2/mixed": RouteConfig(
            accepts=[
                _option(
                    PRICES["mixed_mainnet"],
                    network=MAINNET,
                    asset=BASE_MAINNET_USDC,
                    extra=MAINNET_EXTRA,
                    pay_to=pay_to,
                ),
                _option(PRICES["mixed_testnet"], pay_to=pay_to),
            ]
        ),
        "GET /v2/expensive": RouteConfig(accepts=_option(PRICES["expensive"], pay_to=pay_to)),
        "GET /v2/wrong-domain": RouteConfig(
            accepts=_option(PRICES["wrong_domain"], extra=MAINNET_EXTRA, pay_to=pay_to)
        ),
        "GET /v2/cheaper-elsewhere": RouteConfig(
            accepts=[
                _option(PRICES["wrong_domain"], extra=MAINNET_EXTRA, pay_to=pay_to),
                _option(PRICES["dearer"], pay_to=pay_to),
                _option(PRICES["cheapest_usable"], pay_to=pay_to),
            ]
        ),
        "GET /v2/other-token": RouteConfig(
            accepts=_option(1_000, asset=to_checksum_address("0x" + "42" * 20), pay_to=pay_to)
        ),
        "GET /market/v1/quote/[symbol]": RouteConfig(
            accepts=_option(PRICES["quote"], pay_to=pay_to)
        ),
        "POST /language/v1/translate": RouteConfig(
            accepts=_option(PRICES["translate"], pay_to=pay_to)
        ),
    }


def weather_answer(city: str) -> dict[str, Any]:
    return {"city": city, "forecast": "sunny", "temperature": len(city) + 10}


def _sellers_app(
    testnet: x402FacilitatorSync, mainnet: x402FacilitatorSync, sellers: Sellers
) -> Any:
    clients = [InProcessFacilitator(testnet), InProcessFacilitator(mainnet)]
    server = x402ResourceServer(clients)  # type: ignore[arg-type]
    server.register(TESTNET, ExactEvmServerScheme())
    server.register(MAINNET, ExactEvmServerScheme())
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    def sandbox_of(request: Request) -> str | None:
        return request.headers.get("x-sandbox-mode")

    @app.get("/free")
    async def free() -> dict[str, Any]:
        return {"free": True}

    @app.get("/v2/weather/{city}")
    @app.get("/drop-before/weather/{city}")
    @app.get("/drop-after/weather/{city}")
    @app.get("/drop-always/weather/{city}")
    async def weather(city: str, request: Request) -> dict[str, Any]:
        return {**weather_answer(city), "sandbox": sandbox_of(request)}

    @app.post("/v2/echo")
    async def echo(request: Request) -> dict[str, Any]:
        return {"echo": await request.json(), "sandbox": sandbox_of(request)}

    @app.get("/v2/mixed")
    @app.get("/v2/expensive")
    @app.get("/v2/wrong-domain")
    @app.get("/v2/cheaper-elsewhere")
    @app.get("/v2/other-token")
    async def other(request: Request) -> dict[str, Any]:
        return {"path": request.url.path}

    @app.get("/market/v1/quote/{symbol}")
    async def quote(symbol: str, request: Request) -> dict[str, Any]:
        currency = request.query_params.get("currency", "USD")
        return {
            "symbol": symbol,
            "price": 123.45,
            "currency": currency,
            "sandbox": sandbox_of(request),
        }

    @app.post("/language/v1/translate")
    async def translate(request: Request) -> dict[str, Any]:
        body = await request.json()
        return {
            "translatedText": f"[{body['target']}] {body['text']}",
            "sandbox": sandbox_of(request),
        }

    @app.get("/v1/fact")
    async def fact(request: Request) -> Response:
        return await _v1_seller(request, testnet, sellers.pay_to)

    app.middleware("http")(payment_middleware(_routes(sellers.pay_to), server))
    return HostileSeller(CutOffFirstPaid(app, sellers))


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


async def _v1_seller(request: Request, facilitator: x402FacilitatorSync, pay_to: str) -> Response:
    """An x402 v1 seller on the SDK's v1 models (the SDK middleware speaks v2 only)."""
    requirements = PaymentRequirementsV1(
        scheme="exact",
        network="base-sepolia",
        max_amount_required=str(PRICES["fact"]),
        resource=str(request.url),
        description="a random fact",
        mime_type="application/json",
        pay_to=pay_to,
        max_timeout_seconds=MAX_TIMEOUT,
        asset=BASE_SEPOLIA_USDC,
        extra=TESTNET_EXTRA,
    )

    def required(error: str, headers: dict[str, str] | None = None) -> Response:
        body = PaymentRequiredV1(error=error, accepts=[requirements])
        return JSONResponse(_dump(body), status_code=402, headers=headers)

    header = request.headers.get("X-PAYMENT")
    if not header:
        return required("X-PAYMENT header is required")
    payload = decode_payment_signature_header(header)
    if not isinstance(payload, PaymentPayloadV1):
        return required("X-PAYMENT must carry an x402 v1 payload")
    verified = await asyncio.to_thread(facilitator.verify, payload, requirements)
    if not verified.is_valid:
        return required(verified.invalid_reason or "invalid payment")
    settled = await asyncio.to_thread(facilitator.settle, payload, requirements)
    receipt = {"X-PAYMENT-RESPONSE": encode_payment_response_header(settled)}
    if not settled.success:
        return required(settled.error_reason or "settlement failed", receipt)
    return JSONResponse({"fact": "Octopuses have three hearts.", "x402": 1}, headers=receipt)


@pytest.fixture(scope="session")
def sellers(sandbox_chain: Any) -> Iterator[Sellers]:
    signer = FacilitatorWeb3Signer(ANVIL_DEV_KEYS[3], sandbox_chain.rpc_url)
    testnet = x402FacilitatorSync()
    testnet.register([TESTNET], ExactEvmFacilitatorScheme(signer))
    testnet.register_v1(["base-sepolia"], ExactEvmSchemeV1(signer))
    stub = MainnetVerifyOnlySigner(signer.address)
    mainnet = x402FacilitatorSync()
    mainnet.register([MAINNET], ExactEvmFacilitatorScheme(stub))  # type: ignore[arg-type]

    pay_to = to_checksum_address("0x" + secrets.token_hex(20))
    world = Sellers(url="", pay_to=pay_to)
    with LiveServer(_sellers_app(testnet, mainnet, world)) as server:
        world.url = server.url
        yield world


# ---- a buyer: an account with a funded wallet ------------------------------------------------


@dataclass
class Buyer:
    email: str
    api_key: str
    wallet: str
    service: str  # the paysign base URL
    runtime: Any
    chain: Any

    @property
    def wallet_bytes(self) -> bytes:
        return bytes.fromhex(self.wallet.removeprefix("0x"))

    def balance(self, address: str | None = None) -> int:
        owner = self.wallet if address is None else address
        return int(self.chain.usdc_balance(bytes.fromhex(owner.removeprefix("0x"))))

    def transfers(self) -> list[dict[str, Any]]:
        """Every USDC ``Transfer`` log from the wallet, on the chain."""
        topic_from = "0x" + bytes(12).hex() + self.wallet.removeprefix("0x").lower()
        logs: list[dict[str, Any]] = self.chain.rpc.request(
            "eth_getLogs",
            [
                {
                    "fromBlock": "0x0",
                    "toBlock": "latest",
                    "address": self.chain.usdc_hex,
                    "topics": ["0x" + TRANSFER_TOPIC.hex(), topic_from],
                }
            ],
        )
        return logs

    def ledger(self, decision: str | None = None) -> list[dict[str, Any]]:
        """The account's activity (signatures and refusals), newest first."""
        entries = activity.activity(self.runtime.db, email=self.email)
        return [e for e in entries if decision is None or e["decision"] == decision]

    def decide(self, seller: str, kind: str) -> None:
        policy.decide_seller(
            self.runtime.db, self.runtime.clock, email=self.email, seller=seller, kind=kind
        )


@pytest.fixture
def buyer(
    runtime: Any, sandbox_chain: Any, live_server: Any, account: dict[str, str], sellers: Sellers
) -> Buyer:
    """The test's account (key issued at real time), 127.0.0.1 on its allow list, and
    1 test USDC in its wallet."""
    found = Buyer(
        account["email"],
        account["api_key"],
        account["wallet"],
        live_server.url,
        runtime,
        sandbox_chain,
    )
    found.decide(sellers.host, "allow")
    found.chain.send_usdc(found.wallet_bytes, 1_000_000)
    return found


# ---- the catalog -----------------------------------------------------------------------------


def catalog_document(sellers_url: str) -> dict[str, Any]:
    sandbox_header = {
        "key": "X-Sandbox-Mode",
        "description": "true routes to the sandbox endpoint",
        "required": False,
    }
    return {
        "catalog": [
            {
                "id": "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
                "name": "test_quote",
                "url": f"{sellers_url}/market",
                "path": "/v1/quote/{symbol}",
                "description": "Latest price of a ticker symbol.",
                "priceUsdc": 0.01,
                "method": "GET",
                "tier": "PREMIUM",
                "sandboxAvailable": True,
                "inputs": {
                    "path": [{"key": "symbol", "description": "Ticker", "required": True}],
                    "query": [{"key": "currency", "description": "ISO code", "required": False}],
                    "header": [sandbox_header],
                },
                "tags": ["finance", "quote"],
                "source": {
                    "freshnessBand": "real-time",
                    "uptime": "99.9%",
                    "license": "commercial",
                    "underlyingSource": "Test Exchange",
                },
            },
            {
                "id": "7a2b3c4d-5e6f-4a70-8b9c-0d1e2f3a4b5c",
                "name": "test_translate",
                "url": f"{sellers_url}/language",
                "path": "/v1/translate",
                "description": "Translate a short text.",
                "priceUsdc": 0.003,
                "method": "POST",
                "tier": "STANDARD",
                "sandboxAvailable": True,
                "inputs": {
                    "path": [],
                    "query": [],
                    "header": [sandbox_header],
                    "body": [
                        {"key": "text", "description": "Text", "required": True},
                        {"key": "target", "description": "Language code", "required": True},
                    ],
                },
                "tags": ["language", "translation"],
            },
            {
                "id": "8b3c4d5e-6f7a-4b80-9c0d-1e2f3a4b5c6d",
                "name": "test_filings",
                "url": f"{sellers_url}/market",
                "path": "/v1/filings",
                "description": "Regulatory filings of a company.",
                "priceUsdc": 0.05,
                "method": "GET",
                "tier": "PREMIUM",
                "sandboxAvailable": False,
                "inputs": {
                    "path": [],
                    "query": [{"key": "company", "description": "Name", "required": True}],
                    "header": [],
                },
                "tags": ["finance", "filings"],
                "source": {
                    "freshnessBand": "daily",
                    "uptime": "99.5%",
                    "license": "commercial",
                    "underlyingSource": "Test Registry",
                },
            },
        ]
    }


@pytest.fixture
def catalog(runtime: Any, sellers: Sellers) -> dict[str, Any]:
    document = catalog_document(sellers.url)
    import_catalog(runtime.db, runtime.clock, document)
    return document


@pytest.fixture
def service_logs_off_stdout() -> Iterator[None]:
    """The paysign app runs in this process: its structlog lines would mix with what
    ``CliRunner`` captures. Keep them out of it, and give the next test the configuration
    paysign had (structlog's own defaults print rich tracebacks with the frames' locals)."""
    import structlog

    before = structlog.get_config()
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    yield
    structlog.configure(**before)


def client_for(buyer: Buyer, **kwargs: Any) -> Any:
    from paysign.client import PaysignClient

    return PaysignClient(buyer.api_key, paysign_url=buyer.service, **kwargs)
