"""A listed demo seller whose endpoint answers its 402 with altered terms — a higher amount than
the listing's price, another payTo than the catalog's — is refused, nothing signed, through the
MCP connector (the official MCP client against the served app) and through ``paysign pay``;
its listed terms are paid, so the refusal is the alteration's. A frozen account's refusal and a
refused payee's, through the connector, tell the assistant that only the holder can act.

The seller is a small Starlette app on 127.0.0.1 standing where the demo catalog's listings
point: ``/market/v1/quote/{symbol}`` answers a doubled price to a symbol starting PRICE, a
stranger's payTo to one starting PAYEE, and the listing's terms to any other. Each test asks
for symbols of its own, so the ledger it reads is its own.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import PAY_TO, LiveServer, free_port, signature_body
from paysign.bootstrap import Runtime, build_runtime
from paysign.cli import main
from paysign.client import PayeeMismatch, PaysignClient, PriceAboveListing
from paysign.config import Settings
from paysign.services import accounts, keys, policy
from paysign.services.catalog import seed_demo_catalog
from paysign.store.schema import refusals, signatures

from .conftest import connect

LISTED_PRICE = 10_000  # market_quote: 0.01 USDC
STRANGER = "0x" + "5e" * 20
LIVE = "eip155:8453"


def altered_seller() -> Starlette:
    """Answers 402 with the terms its symbol names, and 200 to a paid request."""

    async def quote(request: Request) -> JSONResponse:
        if "payment-signature" in request.headers:
            return JSONResponse({"symbol": request.path_params["symbol"], "price": 1})
        symbol = request.path_params["symbol"]
        url = str(request.url)
        required: dict[str, Any] = signature_body(
            network=LIVE, amount=str(LISTED_PRICE), seller_url=url
        )["paymentRequired"]  # type: ignore[assignment]
        option = required["accepts"][0]
        if symbol.startswith("PRICE"):
            option["amount"] = str(2 * LISTED_PRICE)
        elif symbol.startswith("PAYEE"):
            option["payTo"] = STRANGER
        header = base64.b64encode(json.dumps(required).encode()).decode()
        return JSONResponse({}, status_code=402, headers={"PAYMENT-REQUIRED": header})

    return Starlette(routes=[Route("/market/v1/quote/{symbol}", quote)])


@dataclass
class Served:
    runtime: Runtime
    service: str
    mcp_url: str
    sellers: str
    email: str
    api_key: str
    account_id: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with LiveServer(altered_seller()) as seller:
        port = free_port()
        settings = Settings(
            port=port,
            data_dir=Path(tmp_path_factory.mktemp("altered")) / "var",
            demo_sellers_url=seller.url,
            catalog_pay_to=PAY_TO,
            connector_allow_private=True,
        )
        runtime = build_runtime(settings)
        assert seed_demo_catalog(runtime.db, runtime.clock, seller.url)
        email = "holder@example.com"
        created = accounts.create_account(
            runtime.db, runtime.vault, runtime.clock, email=email, password="correct horse battery"
        )
        issued = keys.issue_key(runtime.db, runtime.clock, email=email, expires_in_days=30)
        from paysign.app import create_app

        with LiveServer(create_app(runtime), port) as server:
            yield Served(
                runtime,
                server.url,
                settings.resolved_mcp_url,
                seller.url,
                email,
                issued.api_key,
                created.account_id,
            )
        runtime.db.dispose()


def another_holder(served: Served) -> Served:
    """The same service and seller, for an account of the test's own."""
    rt = served.runtime
    email = f"holder-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        rt.db, rt.vault, rt.clock, email=email, password="correct horse battery"
    )
    issued = keys.issue_key(rt.db, rt.clock, email=email, expires_in_days=30)
    return dataclasses.replace(
        served, email=email, api_key=issued.api_key, account_id=created.account_id
    )


def ledger(served: Served, symbol: str) -> tuple[int, list[str]]:
    """How many signatures, and which refusals, the account has for the symbol's URL."""
    path = f"/market/v1/quote/{symbol}"
    with served.runtime.db.read() as conn:
        signed = conn.execute(
            sa.select(sa.func.count())
            .select_from(signatures)
            .where(signatures.c.account_id == served.account_id, signatures.c.seller_path == path)
        ).scalar_one()
        refused = conn.execute(
            sa.select(refusals.c.reason).where(
                refusals.c.account_id == served.account_id, refusals.c.seller_path == path
            )
        ).scalars()
        return int(signed), list(refused)


def call_pay_x402(served: Served, url: str) -> tuple[Any, dict[str, Any]]:
    async def scenario() -> tuple[Any, dict[str, Any]]:
        async with connect(served.mcp_url, served.api_key) as client:
            tools = (await client.list_tools()).tools
            tool = next(t for t in tools if t.name == "pay_x402")
            result = await client.call_tool("pay_x402", {"url": url})
            return result, tool.output_schema or {}

    return asyncio.run(asyncio.wait_for(scenario(), 60))


@pytest.mark.parametrize(
    ("symbol", "kind"), [("PRICE", "price-above-listing"), ("PAYEE", "payee-mismatch")]
)
def test_the_connector_refuses_an_altered_listed_seller(
    served: Served, symbol: str, kind: str
) -> None:
    result, schema = call_pay_x402(served, f"{served.sellers}/market/v1/quote/{symbol}")
    assert result.is_error
    document = result.structured_content or {}
    jsonschema.validate(document, schema)
    error = document["error"]
    assert error["type"] == kind
    assert (error["humanMustAct"], error["retryCanHelp"]) == (False, False)
    assert "spoofed or compromised" in error["whatToDo"]
    assert "Do not retry" in error["whatToDo"]
    if symbol == "PRICE":
        assert "0.01 USDC" in error["whatToDo"]
        assert (error["listedPrice"], error["amount"]) == (LISTED_PRICE, 2 * LISTED_PRICE)
    else:
        assert error["payTo"].lower() == STRANGER
        assert error["listedPayTo"].lower() == PAY_TO.lower()
    assert ledger(served, symbol) == (0, [kind])


def test_the_connector_pays_the_listed_terms(served: Served) -> None:
    result, _ = call_pay_x402(served, f"{served.sellers}/market/v1/quote/FAIR")
    assert not result.is_error, result.content
    payment = (result.structured_content or {})["payment"]
    assert (payment["amount"], payment["payTo"]) == (str(LISTED_PRICE), PAY_TO)
    assert ledger(served, "FAIR") == (1, [])


def test_the_connector_says_only_the_holder_can_unfreeze(served: Served) -> None:
    holder = another_holder(served)
    policy.freeze_spending(holder.runtime.db, holder.runtime.clock, email=holder.email, frozen=True)
    result, _ = call_pay_x402(holder, f"{holder.sellers}/market/v1/quote/FAIR-FROZEN")
    assert result.is_error
    error = (result.structured_content or {})["error"]
    assert error["type"] == "spending-frozen"
    assert (error["humanMustAct"], error["retryCanHelp"]) == (True, False)
    assert "unfreeze" in error["whatToDo"] and "not try other sellers" in error["whatToDo"]
    assert ledger(holder, "FAIR-FROZEN") == (0, ["spending-frozen"])


def test_the_connector_names_the_payee_the_holder_refused(served: Served) -> None:
    holder = another_holder(served)
    document = policy.get_policy(holder.runtime.db, email=holder.email)
    document["payTo"] = {"allow": [], "deny": [PAY_TO.lower()]}
    policy.set_policy(
        holder.runtime.db, holder.runtime.clock, email=holder.email, document=document
    )
    result, _ = call_pay_x402(holder, f"{holder.sellers}/market/v1/quote/FAIR-DENIED")
    assert result.is_error
    error = (result.structured_content or {})["error"]
    assert error["type"] == "payee-denied"
    assert (error["humanMustAct"], error["retryCanHelp"]) == (True, False)
    assert PAY_TO in error["whatToDo"] and "payee rules" in error["whatToDo"]
    assert ledger(holder, "FAIR-DENIED") == (0, ["payee-denied"])


def paysign_pay(served: Served, url: str) -> Any:
    env = {"PAYSIGN_API_KEY": served.api_key, "PAYSIGN_BASE_URL": served.service}
    return CliRunner().invoke(main, ["pay", url], env=env, catch_exceptions=False)


@pytest.mark.parametrize(
    ("symbol", "title"),
    [
        ("PRICE-CLI", "Price above the seller's listing"),
        ("PAYEE-CLI", "Payee differs from the seller's listing"),
    ],
)
def test_paysign_pay_refuses_an_altered_listed_seller(
    served: Served, symbol: str, title: str
) -> None:
    result = paysign_pay(served, f"{served.sellers}/market/v1/quote/{symbol}")
    assert result.exit_code == 1, result.stderr
    assert result.stdout == ""  # no seller answer: nothing was paid
    assert title in result.stderr
    assert "Nothing was signed" in result.stderr
    kind = "price-above-listing" if symbol.startswith("PRICE") else "payee-mismatch"
    assert ledger(served, symbol) == (0, [kind])


def test_paysign_pay_pays_the_listed_terms(served: Served) -> None:
    result = paysign_pay(served, f"{served.sellers}/market/v1/quote/FAIR-CLI")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["symbol"] == "FAIR-CLI"
    assert ledger(served, "FAIR-CLI") == (1, [])


def test_the_client_raises_what_the_alteration_was(served: Served) -> None:
    with PaysignClient(served.api_key, paysign_url=served.service) as http:
        with pytest.raises(PriceAboveListing) as price:
            http.get(f"{served.sellers}/market/v1/quote/PRICE-SDK")
        with pytest.raises(PayeeMismatch) as payee:
            http.get(f"{served.sellers}/market/v1/quote/PAYEE-SDK")
    assert price.value.listed_price == LISTED_PRICE
    for refused in (price.value, payee.value):
        assert (refused.needs_human, refused.retryable) == (False, False)
    assert payee.value.problem["payTo"].lower() == STRANGER
