"""``PaysignSigner`` against the real paysign API over HTTP: signatures, each refusal as its
exception type with the problem document, the catalog with its ETag, test funds."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import LiveServer, free_port, signature_body
from paysign.client import (
    InvalidPaymentTerms,
    MalformedRequest,
    PaysignProblem,
    PaysignSigner,
    RequestTooLarge,
    SandboxNetworkMismatch,
    SellerResourceMismatch,
    SigningUnavailable,
    TestFundsRateLimited,
    Unauthorized,
    UnsupportedPaymentTerms,
)

from .conftest import Buyer


@pytest.fixture
def signer(buyer: Buyer) -> Iterator[PaysignSigner]:
    with PaysignSigner(buyer.api_key, buyer.service) as client:
        yield client


def terms(**kwargs: Any) -> tuple[str, dict[str, Any]]:
    body = signature_body(**kwargs)
    return str(body["sellerUrl"]), body["paymentRequired"]  # type: ignore[return-value]


def test_a_signature_is_returned_as_the_spec_says(signer: PaysignSigner, buyer: Buyer) -> None:
    seller_url, required = terms(max_timeout=60)
    signature = signer.sign(seller_url, required, sandbox=True)

    assert signature.valid_after == 0
    assert signature.valid_before == buyer.runtime.clock.now() + 60
    assert signature.nonce.startswith("0x") and len(signature.nonce) == 66
    payload = json.loads(base64.b64decode(signature.header, validate=True))
    assert payload["accepted"] == required["accepts"][0]
    assert payload["payload"]["authorization"]["nonce"] == signature.nonce
    assert payload["payload"]["authorization"]["from"].lower() == buyer.wallet.lower()
    assert "psk_" not in repr(signer)


def test_the_async_twin_signs_too(signer: PaysignSigner) -> None:
    import asyncio

    seller_url, required = terms(version=1, network="base-sepolia")

    async def main() -> str:
        try:
            return (await signer.asign(seller_url, required, sandbox=True)).header
        finally:
            await signer.aclose()

    payload = json.loads(base64.b64decode(asyncio.run(main())))
    assert (payload["x402Version"], payload["network"]) == (1, "base-sepolia")


@pytest.mark.parametrize(
    ("network", "mutate", "sandbox", "exception", "status"),
    [
        ("eip155:84532", lambda r: r.pop("accepts"), False, MalformedRequest, 400),
        (
            "eip155:84532",
            lambda r: r["accepts"][0].update(amount="-1"),
            False,
            InvalidPaymentTerms,
            422,
        ),
        (
            "eip155:84532",
            lambda r: r["accepts"][0].update(network="eip155:1"),
            False,
            UnsupportedPaymentTerms,
            422,
        ),
        ("eip155:8453", lambda r: None, True, SandboxNetworkMismatch, 422),
        (
            "eip155:84532",
            lambda r: r["resource"].update(url="https://elsewhere.example/pay"),
            False,
            SellerResourceMismatch,
            422,
        ),
        (
            "eip155:84532",
            lambda r: r["resource"].update(description="x" * 70_000),
            False,
            RequestTooLarge,
            413,
        ),
    ],
)
def test_refusals_are_typed_and_carry_the_problem(
    signer: PaysignSigner, network: str, mutate: Any, sandbox: bool, exception: type, status: int
) -> None:
    seller_url, required = terms(network=network)
    mutate(required)
    with pytest.raises(exception) as caught:
        signer.sign(seller_url, required, sandbox=sandbox)

    error = caught.value
    assert isinstance(error, PaysignProblem)
    assert error.status == status == error.problem["status"]
    assert error.problem["type"].endswith("/" + error.slug)
    assert error.title == error.problem["title"] and error.detail == error.problem["detail"]
    assert not error.retryable and not error.needs_human
    assert str(error).startswith(error.title)


def test_an_invalid_or_missing_key_is_unauthorized(buyer: Buyer) -> None:
    seller_url, required = terms()
    with pytest.raises(Unauthorized) as caught:
        PaysignSigner("psk_nope", buyer.service).sign(seller_url, required)
    assert caught.value.problem == {"message": "Unauthorized"}
    with pytest.raises(Unauthorized, match="PAYSIGN_API_KEY"):
        PaysignSigner("", buyer.service).sign(seller_url, required)


def test_an_unreachable_service_is_retried_then_unavailable(buyer: Buyer) -> None:
    seller_url, required = terms()
    dead = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(SigningUnavailable) as caught:
        PaysignSigner(buyer.api_key, dead, retries=2).sign(seller_url, required)
    assert caught.value.retryable
    assert time.monotonic() - started >= 0.7  # two retries, with backoff (0.25 s, 0.5 s)
    assert buyer.ledger() == []


class Recording(httpx.HTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.statuses.append(response.status_code)
        return response


def test_the_catalog_is_read_and_revalidated_with_its_etag(
    catalog: dict[str, Any], buyer: Buyer
) -> None:
    transport = Recording()
    anonymous = PaysignSigner(api_key="", base_url=buyer.service, transport=transport)
    first = anonymous.catalog()
    again = anonymous.catalog()

    assert transport.statuses == [200, 304]
    assert again == first
    assert {x["name"] for x in first["catalog"]} == {x["name"] for x in catalog["catalog"]}
    assert set(first) == {"paymentDetails", "sandboxPaymentDetails", "catalog"}
    with pytest.raises(Unauthorized):
        PaysignSigner("psk_nope", buyer.service).catalog()
    assert PaysignSigner(buyer.api_key, buyer.service).catalog() == first


def test_test_funds_once_a_day(chained_runtime: Any, buyer: Buyer) -> None:
    from paysign.app import create_app

    with (
        LiveServer(create_app(chained_runtime)) as server,
        PaysignSigner(buyer.api_key, server.url) as signer,
    ):
        before = buyer.balance()
        granted = signer.request_test_funds()
        assert granted["network"] == "eip155:84532"
        assert buyer.balance() == before + 10_000_000
        with pytest.raises(TestFundsRateLimited) as caught:
            signer.request_test_funds()
    assert caught.value.status == 429 and caught.value.retryable
    assert caught.value.retry_after is not None and caught.value.retry_after > 0
