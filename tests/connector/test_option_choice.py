"""Which of a seller's options ``pay_x402`` pays, against a seller built with the x402 SDK (its
FastAPI payment middleware, the demo's facilitator settling on the dev chain): the cheapest one
paysign can sign, never one whose ``extra`` names another token's EIP-712 domain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from x402 import x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient, PaymentOption, RouteConfig
from x402.http.middleware.fastapi import payment_middleware
from x402.mechanisms.evm.exact import ExactEvmServerScheme
from x402.schemas import AssetAmount

from .conftest import Served, World, allowed_buyer, balance, paid_in_sandbox

#: Listed in this order; the first names the mainnet USDC's domain on the testnet.
OTHER_DOMAIN, DEARER, CHEAPEST_USABLE = 500, 9_000, 4_000


def seller_of_three_options(world: World, paid: list[dict[str, Any]]) -> FastAPI:
    terms = world.stack.terms["sandbox"]
    server = x402ResourceServer(
        HTTPFacilitatorClient(FacilitatorConfig(url=world.stack.facilitator_url))
    )
    server.register(terms.network, ExactEvmServerScheme())  # type: ignore[no-untyped-call,arg-type]

    def option(amount: int, extra: dict[str, str]) -> PaymentOption:
        return PaymentOption(
            scheme="exact",
            pay_to=world.sandbox_pay_to,
            price=AssetAmount(amount=str(amount), asset=terms.asset, extra=extra),
            network=terms.network,
            max_timeout_seconds=60,
        )

    async def answer(request: Request) -> Response:
        paid.append(request.state.payment_payload.accepted.model_dump(by_alias=True))
        return JSONResponse({"answer": 42})

    route = RouteConfig(
        accepts=[
            option(OTHER_DOMAIN, {"name": "USD Coin", "version": "2"}),
            option(DEARER, dict(terms.extra)),
            option(CHEAPEST_USABLE, dict(terms.extra)),
        ],
        description="three prices",
        mime_type="application/json",
    )
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.add_route("/three", answer, methods=["GET"])
    app.middleware("http")(payment_middleware({"GET /three": route}, server))
    return app


@pytest.fixture
def seller(world: World) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    paid: list[dict[str, Any]] = []
    with Served(seller_of_three_options(world, paid)) as served:
        yield f"{served.url}/three", paid


def test_the_cheapest_option_paysign_can_sign_is_paid(
    world: World, seller: tuple[str, list[dict[str, Any]]]
) -> None:
    url, paid = seller
    buyer = allowed_buyer(world, url)
    before = balance(world, buyer.wallet)

    out = paid_in_sandbox(world, buyer, url)
    assert out["status"] == 200 and out["body"] == {"answer": 42}
    assert out["payment"]["sellerReportsSettled"] is True
    (accepted,) = paid
    assert accepted["amount"] == str(CHEAPEST_USABLE)
    assert before - balance(world, buyer.wallet) == CHEAPEST_USABLE
