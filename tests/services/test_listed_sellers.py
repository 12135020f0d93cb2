"""A listed seller held to its listing on the connector's path (``connector.payment.pay``, the
same signing use case as the API's), on SQLite and PostgreSQL: a seller endpoint whose terms
were altered — a higher amount, another payee — is refused, and nothing is signed."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx
import pytest

from conftest import PAY_TO, signature_body
from paysign.connector.outbound import Outbound, OutboundLimits
from paysign.connector.payment import SellerCall, ToolFailure, pay
from paysign.services.catalog import Catalog, demo_catalog, import_catalog
from paysign.services.signing import SigningDeps, by_api_key
from paysign.store.schema import refusals, signatures

SELLERS = "https://sellers.example.com"
QUOTE_URL = f"{SELLERS}/market/v1/quote/ACME"  # market_quote: 0.01 USDC
QUOTE_PRICE = 10_000


def seller_terms(**changes: Any) -> dict[str, Any]:
    required: dict[str, Any] = copy.deepcopy(
        signature_body(network="eip155:84532", amount=str(QUOTE_PRICE), seller_url=QUOTE_URL)[
            "paymentRequired"
        ]
    )
    required["accepts"][0].update(changes)
    return required


@pytest.fixture
def connector_pays(runtime, signing_store):
    import_catalog(runtime.db, runtime.clock, demo_catalog(SELLERS))
    settings = runtime.settings.model_copy(update={"catalog_pay_to": PAY_TO})
    catalog = Catalog(runtime.db, settings)
    deps = SigningDeps(
        signing_store, runtime.vault, runtime.clock, runtime.registry, catalog, listings=catalog
    )

    def pay_with(api_key: str, terms: dict[str, Any]) -> tuple[Any, list[httpx.Request]]:
        calls: list[httpx.Request] = []

        def seller(request: httpx.Request) -> httpx.Response:
            calls.append(request)
            if "payment-signature" in request.headers:
                return httpx.Response(200, json={"quote": 1})
            return httpx.Response(402, headers={"PAYMENT-REQUIRED": encode(terms)}, json={})

        limits = OutboundLimits(allow_private=True)
        outbound = Outbound(limits, transport=httpx.MockTransport(seller))
        call = SellerCall("GET", QUOTE_URL, sandbox=True)
        result = asyncio.run(
            pay(deps, outbound, by_api_key(api_key), call, portal_url="https://portal.example")
        )
        return result, calls

    return pay_with


def encode(terms: dict[str, Any]) -> str:
    import base64
    import json

    return base64.b64encode(json.dumps(terms).encode()).decode()


def test_the_connector_pays_a_listed_seller_its_listed_terms(connector_pays, account) -> None:
    result, calls = connector_pays(account["api_key"], seller_terms())
    assert result["status"] == 200
    assert result["payment"]["amount"] == str(QUOTE_PRICE)
    assert len(calls) == 2


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({"amount": str(QUOTE_PRICE * 3)}, "price-above-listing"),
        ({"payTo": "0x" + "ab" * 20}, "payee-mismatch"),
    ],
)
def test_the_connector_refuses_a_listed_seller_whose_terms_were_altered(
    connector_pays, account, runtime, changes, kind
) -> None:
    with pytest.raises(ToolFailure) as refused:
        connector_pays(account["api_key"], seller_terms(**changes))
    assert refused.value.kind == kind
    assert refused.value.extra["listing"] == "market_quote"
    with runtime.db.read() as conn:
        assert conn.execute(signatures.select()).first() is None
        assert [r.reason for r in conn.execute(refusals.select())] == [kind]
