"""A payment through the connector leaves no reference cycle of paysign's, refused or not: a
refusal is the signing use case's answer, kept as its request's outcome and raised once
answered, so the frames of the traceback it was raised with hold it (``services.signing``
raises it again without one)."""

from __future__ import annotations

import asyncio
import collections

import httpx
import pytest

from conftest import signature_body
from garbage_support import described, of_paysign, unreachable_after
from paysign.bootstrap import Runtime
from paysign.connector.outbound import Outbound, OutboundLimits
from paysign.connector.payment import SellerCall, ToolFailure, pay
from paysign.services.signing import SigningDeps, by_api_key
from paysign.store.signing_store import SigningStore

ALLOWED = "https://api.example.com/weather"
#: A key of the right shape that nobody issued.
UNISSUED_KEY = "psk_" + "x" * 43


def seller(resource: str) -> httpx.MockTransport:
    """A seller that asks for a payment of terms for ``resource``, and answers once paid.
    In process: the real sockets of a served seller leave garbage of uvicorn's own, which
    holds paysign's protocol and would count here."""

    def answer(request: httpx.Request) -> httpx.Response:
        if "x-payment" in request.headers:
            return httpx.Response(200, json={"weather": "sunny"})
        terms = signature_body(network="base-sepolia", version=1, seller_url=resource)
        return httpx.Response(402, json=terms["paymentRequired"])

    return httpx.MockTransport(answer)


@pytest.mark.parametrize(
    ("url", "resource", "issued", "outcome"),
    [
        (ALLOWED, ALLOWED, True, 200),
        (
            "https://never-allowed.example.net/x",
            "https://never-allowed.example.net/x",
            True,
            "allow-pending",
        ),
        (ALLOWED, "https://evil.example/weather", True, "seller-resource-mismatch"),
        (ALLOWED, ALLOWED, False, "unauthorized"),
    ],
    ids=["paid", "refused", "terms-refused", "unauthorized"],
)
def test_a_payment_leaves_no_cyclic_garbage(
    runtime: Runtime,
    signing_store: SigningStore,
    account: dict[str, str],
    url: str,
    resource: str,
    issued: bool,
    outcome: object,
) -> None:
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    outbound = Outbound(OutboundLimits(allow_private=True), transport=seller(resource))
    payer = by_api_key(account["api_key"] if issued else UNISSUED_KEY)
    call = SellerCall("GET", url, sandbox=True)
    outcomes: collections.Counter[object] = collections.Counter()

    async def payments(n: int) -> None:
        for _ in range(n):
            try:
                paid = await pay(deps, outbound, payer, call, portal_url="https://portal.example")
            except ToolFailure as failure:
                outcomes[failure.kind] += 1
            else:
                outcomes[paid["status"]] += 1

    asyncio.run(payments(3))
    with unreachable_after() as garbage:
        asyncio.run(payments(10))
    assert set(outcomes) == {outcome}, outcomes
    left = of_paysign(garbage)
    assert not left, described(left)
