"""x402 v2's ``payment-identifier`` extension against a seller built with the x402 SDK that
requires it (its FastAPI payment middleware, the extension's own declaration and check, the
demo's facilitator settling on the dev chain): paysign fills the id in, the seller is paid; a
payment without it is refused by that seller and nothing settles."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from x402 import x402ResourceServer
from x402.extensions.payment_identifier import (
    PAYMENT_IDENTIFIER,
    declare_payment_identifier_extension,
    extract_payment_identifier,
    validate_payment_identifier_requirement,
)
from x402.http import FacilitatorConfig, HTTPFacilitatorClient, PaymentOption, RouteConfig
from x402.http.middleware.fastapi import payment_middleware
from x402.mechanisms.evm.exact import ExactEvmServerScheme
from x402.schemas import AssetAmount

from .conftest import Served, World, allowed_buyer, balance, paid_in_sandbox

PRICE = 1_000


def strict_seller(world: World, seen: list[str | None]) -> FastAPI:
    """One paid route that declares ``payment-identifier`` required and checks it, as the
    extension's documentation tells a resource server to."""
    terms = world.stack.terms["sandbox"]
    server = x402ResourceServer(
        HTTPFacilitatorClient(FacilitatorConfig(url=world.stack.facilitator_url))
    )
    server.register(terms.network, ExactEvmServerScheme())  # type: ignore[no-untyped-call,arg-type]

    async def paid(request: Request) -> Response:
        payload = request.state.payment_payload
        check = validate_payment_identifier_requirement(payload, server_required=True)
        if not check.valid:
            return JSONResponse({"error": check.errors}, status_code=400)  # not settled
        seen.append(extract_payment_identifier(payload))
        return JSONResponse({"paymentId": seen[-1]})

    route = RouteConfig(
        accepts=PaymentOption(
            scheme="exact",
            pay_to=world.sandbox_pay_to,
            price=AssetAmount(amount=str(PRICE), asset=terms.asset, extra=terms.extra),
            network=terms.network,
            max_timeout_seconds=60,
        ),
        description="needs a payment identifier",
        mime_type="application/json",
        extensions={PAYMENT_IDENTIFIER: declare_payment_identifier_extension(required=True)},
    )
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.add_route("/paid", paid, methods=["GET"])
    app.middleware("http")(payment_middleware({"GET /paid": route}, server))
    return app


@pytest.fixture
def seller(world: World) -> Iterator[tuple[str, list[str | None]]]:
    seen: list[str | None] = []
    with Served(strict_seller(world, seen)) as served:
        yield f"{served.url}/paid", seen


def test_the_connector_fills_in_the_identifier_the_seller_requires(
    world: World, seller: tuple[str, list[str | None]]
) -> None:
    url, seen = seller
    buyer = allowed_buyer(world, url)
    before = balance(world, buyer.wallet)

    out = paid_in_sandbox(world, buyer, url)
    assert out["status"] == 200 and out["payment"]["sellerReportsSettled"] is True
    nonce = out["payment"]["nonce"].removeprefix("0x")
    assert seen == [f"pay_{nonce}"] and out["body"] == {"paymentId": f"pay_{nonce}"}
    assert before - balance(world, buyer.wallet) == PRICE


def test_without_the_identifier_that_seller_refuses_and_nothing_settles(
    world: World, seller: tuple[str, list[str | None]]
) -> None:
    url, seen = seller
    buyer = allowed_buyer(world, url)
    before = balance(world, buyer.wallet)
    sandbox = {"X-Sandbox-Mode": "true"}
    terms = json.loads(base64.b64decode(httpx.get(url).headers["PAYMENT-REQUIRED"]))
    assert terms["extensions"][PAYMENT_IDENTIFIER]["info"] == {"required": True}
    del terms["extensions"]  # as a client that does not know the extension would sign
    signed = httpx.post(
        f"{world.service}/wallets/signatures",
        json={"sellerUrl": url, "paymentRequired": terms},
        headers={"Authorization": f"Bearer {buyer.api_key}", **sandbox},
    )
    assert signed.status_code == 200, signed.text
    paid = httpx.get(
        url, headers={"PAYMENT-SIGNATURE": signed.json()["paymentSignatureHeader"]}, timeout=30
    )
    assert paid.status_code == 400
    assert "payment identifier" in paid.text
    assert seen == [] and balance(world, buyer.wallet) == before
