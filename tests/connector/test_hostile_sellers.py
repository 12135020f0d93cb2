"""A seller that takes the payment and then answers what cannot be read: too big, nested past
the parser's depth, redirected nowhere, or not at all. The connector signed and sent a payment
the seller may still settle, so the assistant must hear exactly that, with the payment, and
never "nothing was paid" (which invites it to pay again). The seller is a real server on
127.0.0.1; the payment is signed by the real use case on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from conftest import LiveServer, signature_body
from paysign.bootstrap import Runtime
from paysign.connector.builtin_tools import pay_x402_call
from paysign.connector.outbound import Outbound, OutboundLimits, OutboundRefused
from paysign.connector.payment import SellerCall, ToolFailure, pay
from paysign.protocol.payment_required import (
    UnreadableTerms,
    decode_payment_required,
    decode_settlement,
)
from paysign.services import policy
from paysign.services.signing import SigningDeps, by_api_key
from paysign.store import repositories as repo
from paysign.store.signing_store import SigningStore

LIMITS = OutboundLimits(allow_private=True, max_response_bytes=300_000, timeout_seconds=2)


def deep_json() -> bytes:
    """A JSON array nested past the parser's depth (the recursion limit, which a library may
    have raised on import)."""
    depth = sys.getrecursionlimit() + 1_000
    return ("[" * depth + "]" * depth).encode()


def hostile_seller(received: list[str]) -> Starlette:
    """Asks for a payment at ``/{answer}``; once paid, answers as ``answer`` says."""

    async def paid_endpoint(request: Request) -> Response:
        answer = request.path_params["answer"]
        header = request.headers.get("x-payment")
        if header is None:
            terms = signature_body(network="base-sepolia", version=1, seller_url=str(request.url))
            return JSONResponse(terms["paymentRequired"], status_code=402)
        received.append(header)
        if answer == "too-big":
            return Response(b"x" * 400_000, media_type="text/plain")
        if answer == "deep-body":
            return Response(deep_json(), media_type="application/json")
        if answer == "nowhere":
            return Response(status_code=302, headers={"location": "http://127.0.0.1:99999/"})
        await asyncio.sleep(LIMITS.timeout_seconds * 2)  # "silent"
        return JSONResponse({"late": True})

    return Starlette(routes=[Route("/{answer}", paid_endpoint)])


@pytest.fixture
def seller() -> Iterator[tuple[str, list[str]]]:
    received: list[str] = []
    with LiveServer(hostile_seller(received)) as server:
        yield server.url, received


def pay_once(
    runtime: Runtime, signing_store: SigningStore, account: dict[str, str], url: str
) -> dict[str, Any]:
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    call = SellerCall("GET", url, sandbox=True)
    payer = by_api_key(account["api_key"])
    return asyncio.run(pay(deps, Outbound(LIMITS), payer, call, portal_url="https://portal"))


@pytest.mark.parametrize("answer", ["too-big", "nowhere", "silent"])
def test_a_payment_the_seller_took_without_a_readable_answer_is_reported_sent(
    runtime, signing_store, account, seller, answer
) -> None:
    base, received = seller
    host = base.removeprefix("http://")
    policy.decide_seller(
        runtime.db, runtime.clock, email=account["email"], seller=host, kind="allow"
    )
    with pytest.raises(ToolFailure) as caught:
        pay_once(runtime, signing_store, account, f"{base}/{answer}")
    failure = caught.value
    document = failure.document()
    assert document["error"]["type"] == "payment-sent-unanswered"
    assert "signed and sent" in document["error"]["detail"]
    assert "Nothing was paid" not in json.dumps(document)
    assert "second payment" in document["error"]["whatToDo"]
    assert document["error"]["retryCanHelp"] is False
    # The payment reported is the one the seller holds, and the one recorded.
    [header] = received
    sent = json.loads(base64.b64decode(header))["payload"]["authorization"]
    payment = document["payment"]
    assert (payment["nonce"], payment["validBefore"]) == (sent["nonce"], int(sent["validBefore"]))
    assert payment["settled"] is False
    with runtime.db.read() as conn:
        [recorded] = repo.signatures_of(conn, account["account_id"])
    assert "0x" + recorded.nonce.hex() == sent["nonce"]


def test_a_paid_answer_nested_past_the_parsers_depth_is_given_as_text(
    runtime, signing_store, account, seller
) -> None:
    """The seller answered 200: the call is paid, and a body the parser cannot take is
    given as its text."""
    base, received = seller
    host = base.removeprefix("http://")
    policy.decide_seller(
        runtime.db, runtime.clock, email=account["email"], seller=host, kind="allow"
    )
    result = pay_once(runtime, signing_store, account, f"{base}/deep-body")
    assert (result["status"], result["body"]) == (200, deep_json().decode())
    assert len(received) == 1


def test_terms_and_receipts_nested_past_the_parsers_depth_are_unreadable() -> None:
    encoded = base64.b64encode(deep_json()).decode()
    with pytest.raises(UnreadableTerms):
        decode_payment_required({"PAYMENT-REQUIRED": encoded}, b"")
    with pytest.raises(UnreadableTerms):
        decode_payment_required({}, deep_json())
    assert decode_settlement({"PAYMENT-RESPONSE": encoded}) is None


@pytest.mark.parametrize("header", [{"X-Name": "é"}, {"X-Name": "a\r\nb"}, {"Bad Name": "x"}])
def test_a_header_http_cannot_carry_is_an_invalid_argument(header: dict[str, str]) -> None:
    with pytest.raises(ToolFailure) as caught:
        pay_x402_call({"url": "https://api.example.com/x", "headers": header}, None)
    assert (caught.value.kind, caught.value.extra["argument"]) == ("invalid-arguments", "headers")


def test_a_redirect_to_no_port_and_a_header_httpx_cannot_encode_are_refused(seller) -> None:
    base, _ = seller
    outbound = Outbound(LIMITS)
    with pytest.raises(OutboundRefused) as caught:
        asyncio.run(outbound.request("GET", "http://127.0.0.1:99999/x"))
    assert caught.value.reason == "url"
    with pytest.raises(OutboundRefused) as caught:
        asyncio.run(outbound.request("GET", f"{base}/x", headers={"X-Name": "é"}))
    assert caught.value.reason == "url"
