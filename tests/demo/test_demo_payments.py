"""Paying the demo sellers end to end: real HTTP, the real dev chain, and on the seller's side
only code nobody here wrote (the x402 SDK's middleware, v1 models and facilitator).

Each test is an agent's procedure (spec 4.1, "Completing a payment"): call the seller, get 402,
decode the terms, sign them with paysign's API in sandbox mode, call again with the header, and
read the seller's receipt; then the chain is asked what really happened.
"""

from __future__ import annotations

import base64
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import free_port
from paysign.chain.devchain import ANVIL_DEV_KEYS
from paysign.chain.errors import ExecutionReverted
from paysign.chain.usdc import transfer_with_authorization_data
from paysign.config import BASE_MAINNET_USDC, BASE_SEPOLIA_USDC
from paysign.demo.runner import DemoStack
from paysign.demo.terms import DemoSettings
from paysign.services import policy

from .conftest import (
    SANDBOX,
    Balances,
    Buyer,
    DemoWorld,
    address,
    assert_receipt_pays,
    b64json,
    new_pay_to,
    payment_required,
    sign,
    transfers,
    wait_for,
)

NONCE_USED = "invalid_exact_evm_nonce_already_used"


def sandbox_terms(world: DemoWorld, amount: int) -> dict[str, object]:
    return {
        "scheme": "exact",
        "network": "eip155:84532",
        "asset": BASE_SEPOLIA_USDC,
        "amount": str(amount),
        "payTo": world.sandbox_pay_to,
        "maxTimeoutSeconds": 60,
        "extra": {"name": "USDC", "version": "2"},
    }


def pay_v2(world: DemoWorld, buyer: Buyer, url: str, amount: int) -> tuple[str, httpx.Response]:
    """A whole sandbox GET payment; the header used and the seller's paid answer."""
    terms = payment_required(httpx.get(url, headers=SANDBOX))
    assert terms["accepts"] == [sandbox_terms(world, amount)]
    header = sign(world, buyer, url, terms)["paymentSignatureHeader"]
    paid = httpx.get(url, headers={**SANDBOX, "PAYMENT-SIGNATURE": header}, timeout=30)
    assert paid.status_code == 200, paid.text
    return header, paid


@pytest.mark.parametrize(
    ("path", "price", "field", "value"),
    [
        ("/market/v1/quote/acme", 10_000, "symbol", "ACME"),
        ("/market/v1/filings?company=Acme&limit=2", 50_000, "company", "Acme"),
        ("/weather/v1/forecast/Paris?units=imperial", 2_000, "temperatureUnit", "F"),
    ],
)
def test_a_v2_get_is_paid_and_settled_on_chain(
    demo_world: DemoWorld, buyer: Buyer, path: str, price: int, field: str, value: str
) -> None:
    url = demo_world.sellers + path
    unpaid = httpx.get(url, headers=SANDBOX)
    terms = payment_required(unpaid)
    assert terms["x402Version"] == 2
    assert terms["resource"]["url"] == url
    assert terms["accepts"] == [sandbox_terms(demo_world, price)]

    signed = sign(demo_world, buyer, url, terms)
    assert signed["validAfter"] == 0
    assert 55 <= signed["validBefore"] - time.time() <= 61  # the seller's 60 s
    balances = Balances(demo_world, buyer.wallet, demo_world.sandbox_pay_to)
    paid = httpx.get(
        url, headers={**SANDBOX, "PAYMENT-SIGNATURE": signed["paymentSignatureHeader"]}
    )

    assert paid.status_code == 200, paid.text
    body = paid.json()
    assert body[field] == value
    assert body["sandbox"] is True
    receipt = b64json(paid.headers["PAYMENT-RESPONSE"])
    assert receipt["success"] is True
    assert receipt["network"] == "eip155:84532"
    assert receipt["payer"].lower() == buyer.wallet.lower()
    assert_receipt_pays(
        demo_world,
        receipt["transaction"],
        payer=buyer.wallet,
        pay_to=demo_world.sandbox_pay_to,
        amount=price,
    )
    assert balances.moved() == {buyer.wallet: -price, demo_world.sandbox_pay_to: price}
    assert len(transfers(demo_world, buyer.wallet)) == 1
    nonce = bytes.fromhex(signed["nonce"].removeprefix("0x"))
    assert demo_world.chain.authorization_used(address(buyer.wallet), nonce)


def test_the_post_listing_is_paid_with_its_body(demo_world: DemoWorld, buyer: Buyer) -> None:
    url = demo_world.sellers + "/language/v1/translate"
    request = {"text": "good morning", "target": "fr"}
    terms = payment_required(httpx.post(url, json=request, headers=SANDBOX))
    assert terms["accepts"] == [sandbox_terms(demo_world, 3_000)]
    header = sign(demo_world, buyer, url, terms)["paymentSignatureHeader"]
    balances = Balances(demo_world, buyer.wallet, demo_world.sandbox_pay_to)

    paid = httpx.post(url, json=request, headers={**SANDBOX, "PAYMENT-SIGNATURE": header})

    assert paid.status_code == 200, paid.text
    assert paid.json()["translatedText"] == "bonjour"
    receipt = b64json(paid.headers["PAYMENT-RESPONSE"])
    assert receipt["success"] is True
    assert_receipt_pays(
        demo_world,
        receipt["transaction"],
        payer=buyer.wallet,
        pay_to=demo_world.sandbox_pay_to,
        amount=3_000,
    )
    assert balances.moved() == {buyer.wallet: -3_000, demo_world.sandbox_pay_to: 3_000}


def test_a_call_the_seller_fails_is_not_settled(demo_world: DemoWorld, buyer: Buyer) -> None:
    """The SDK middleware settles only answers below 400: a bad request keeps the money, and
    the unused signature still pays for a good one."""
    url = demo_world.sellers + "/language/v1/translate"
    terms = payment_required(httpx.post(url, json={"text": "hello"}, headers=SANDBOX))
    header = sign(demo_world, buyer, url, terms)["paymentSignatureHeader"]
    paying = {**SANDBOX, "PAYMENT-SIGNATURE": header}

    failed = httpx.post(url, json={"text": "hello"}, headers=paying)  # no "target"
    assert failed.status_code == 400
    assert failed.json()["error"] == "bad_input"
    assert transfers(demo_world, buyer.wallet) == []

    paid = httpx.post(url, json={"text": "hello", "target": "es"}, headers=paying)
    assert paid.status_code == 200, paid.text
    assert paid.json()["translatedText"] == "hola"
    assert len(transfers(demo_world, buyer.wallet)) == 1


def test_the_v1_seller_is_paid_with_x_payment(demo_world: DemoWorld, buyer: Buyer) -> None:
    url = demo_world.sellers + "/facts/v1/fact"
    unpaid = httpx.get(url, headers=SANDBOX)
    assert unpaid.status_code == 402
    assert "PAYMENT-REQUIRED" not in unpaid.headers  # v1: the terms are the body
    terms = payment_required(unpaid)
    assert terms["error"] == "X-PAYMENT header is required"
    assert terms["accepts"] == [
        {
            "scheme": "exact",
            "network": "base-sepolia",
            "maxAmountRequired": "1000",
            "resource": url,
            "description": "A random fact (an x402 v1 seller in the Open Ecosystem).",
            "mimeType": "application/json",
            "payTo": demo_world.sandbox_pay_to,
            "maxTimeoutSeconds": 60,
            "asset": BASE_SEPOLIA_USDC,
            "extra": {"name": "USDC", "version": "2"},
        }
    ]

    header = sign(demo_world, buyer, url, terms)["paymentSignatureHeader"]
    payload = b64json(header)
    assert (payload["x402Version"], payload["network"]) == (1, "base-sepolia")
    balances = Balances(demo_world, buyer.wallet, demo_world.sandbox_pay_to)
    paid = httpx.get(url, headers={**SANDBOX, "X-PAYMENT": header})

    assert paid.status_code == 200, paid.text
    assert paid.json()["fact"]
    receipt = b64json(paid.headers["X-PAYMENT-RESPONSE"])
    assert receipt["success"] is True
    assert receipt["network"] == "base-sepolia"
    assert_receipt_pays(
        demo_world,
        receipt["transaction"],
        payer=buyer.wallet,
        pay_to=demo_world.sandbox_pay_to,
        amount=1_000,
    )
    assert balances.moved() == {buyer.wallet: -1_000, demo_world.sandbox_pay_to: 1_000}

    replayed = httpx.get(url, headers={**SANDBOX, "X-PAYMENT": header})
    assert replayed.status_code == 402
    # The SDK's v1 scheme does not decode the revert of its simulation as v2's does.
    assert replayed.json()["error"] in (
        NONCE_USED,
        "invalid_exact_evm_transaction_simulation_failed",
    )
    assert balances.moved() == {buyer.wallet: -1_000, demo_world.sandbox_pay_to: 1_000}


def test_a_replayed_header_is_refused_and_pays_nothing(demo_world: DemoWorld, buyer: Buyer) -> None:
    url = demo_world.sellers + "/market/v1/quote/replay"
    header, _ = pay_v2(demo_world, buyer, url, 10_000)
    balances = Balances(demo_world, buyer.wallet, demo_world.sandbox_pay_to)

    replayed = httpx.get(url, headers={**SANDBOX, "PAYMENT-SIGNATURE": header})

    assert replayed.status_code == 402
    assert "PAYMENT-RESPONSE" not in replayed.headers
    assert b64json(replayed.headers["PAYMENT-REQUIRED"])["error"] == NONCE_USED
    assert balances.moved() == {buyer.wallet: 0, demo_world.sandbox_pay_to: 0}
    assert len(transfers(demo_world, buyer.wallet)) == 1


def test_resending_after_a_dropped_response_does_not_pay_twice(
    demo_world: DemoWorld, buyer: Buyer
) -> None:
    """Spec 4.1 rule 6: no answer came, so the agent sends the same signature again."""
    url = demo_world.sellers + "/weather/v1/forecast/Oslo"
    terms = payment_required(httpx.get(url, headers=SANDBOX))
    signed = sign(demo_world, buyer, url, terms)
    header = signed["paymentSignatureHeader"]
    nonce = bytes.fromhex(signed["nonce"].removeprefix("0x"))
    balances = Balances(demo_world, buyer.wallet, demo_world.sandbox_pay_to)

    # The first call reaches the seller, which settles; its answer never reaches the agent.
    where = urlsplit(url)
    assert where.hostname is not None and where.port is not None
    with socket.create_connection((where.hostname, where.port), timeout=10) as connection:
        connection.sendall(
            f"GET {where.path} HTTP/1.1\r\nHost: {where.netloc}\r\nX-Sandbox-Mode: true\r\n"
            f"PAYMENT-SIGNATURE: {header}\r\nConnection: close\r\n\r\n".encode()
        )
        wait_for(lambda: demo_world.chain.authorization_used(address(buyer.wallet), nonce))
    # ... dropped unread. The agent retries with the same header.
    retried = httpx.get(url, headers={**SANDBOX, "PAYMENT-SIGNATURE": header})

    assert retried.status_code == 402
    assert b64json(retried.headers["PAYMENT-REQUIRED"])["error"] == NONCE_USED
    (transfer,) = transfers(demo_world, buyer.wallet)
    assert int(transfer["data"], 16) == 2_000
    assert balances.moved() == {buyer.wallet: -2_000, demo_world.sandbox_pay_to: 2_000}


def test_the_same_header_sent_concurrently_pays_once(demo_world: DemoWorld, buyer: Buyer) -> None:
    url = demo_world.sellers + "/weather/v1/forecast/Lima"
    terms = payment_required(httpx.get(url, headers=SANDBOX))
    header = sign(demo_world, buyer, url, terms)["paymentSignatureHeader"]
    balances = Balances(demo_world, buyer.wallet, demo_world.sandbox_pay_to)

    def call(_: int) -> int:
        paying = {**SANDBOX, "PAYMENT-SIGNATURE": header}
        return httpx.get(url, headers=paying, timeout=30).status_code

    with ThreadPoolExecutor(5) as pool:
        statuses = sorted(pool.map(call, range(5)))

    assert statuses == [200, 402, 402, 402, 402]
    assert len(transfers(demo_world, buyer.wallet)) == 1
    assert balances.moved() == {buyer.wallet: -2_000, demo_world.sandbox_pay_to: 2_000}


def test_a_signature_presented_after_valid_before_does_not_settle(
    demo_world: DemoWorld, buyer: Buyer
) -> None:
    """Sellers whose maxTimeoutSeconds is 1: paysign signs validBefore = now + 1, so waiting
    past it takes a second, on every clock that checks it (the facilitator's and the chain's)."""
    settings = demo_world.settings.model_copy(
        update={"demo_sellers_url": f"http://127.0.0.1:{free_port()}"}
    )
    hasty_demo = DemoSettings(
        facilitator_port=0,
        facilitator_key=ANVIL_DEV_KEYS[2],
        sandbox_pay_to=new_pay_to(),
        max_timeout_seconds=1,
    )
    with DemoStack(settings, hasty_demo) as hasty:
        rt = demo_world.runtime
        host = urlsplit(hasty.sellers_url).netloc  # listed nowhere: an Open Ecosystem seller
        policy.decide_seller(rt.db, rt.clock, email=buyer.email, seller=host, kind="allow")
        url = hasty.sellers_url + "/market/v1/quote/late"
        terms = payment_required(httpx.get(url, headers=SANDBOX))
        assert terms["accepts"][0]["maxTimeoutSeconds"] == 1
        signed = sign(demo_world, buyer, url, terms)
        valid_before = signed["validBefore"]
        assert valid_before <= time.time() + 1

        while time.time() <= valid_before + 0.2:
            time.sleep(0.05)
        late = httpx.get(
            url, headers={**SANDBOX, "PAYMENT-SIGNATURE": signed["paymentSignatureHeader"]}
        )

    assert late.status_code == 402
    assert "PAYMENT-RESPONSE" not in late.headers
    reason = b64json(late.headers["PAYMENT-REQUIRED"])["error"]
    assert reason == "invalid_exact_evm_payload_authorization_valid_before"
    assert transfers(demo_world, buyer.wallet) == []
    nonce = bytes.fromhex(signed["nonce"].removeprefix("0x"))
    assert not demo_world.chain.authorization_used(address(buyer.wallet), nonce)

    # Nor could anyone settle it without the facilitator's clock: the token refuses it too (in
    # the next block; "latest" may be older than validBefore, as no block is mined meanwhile).
    authorization = b64json(signed["paymentSignatureHeader"])["payload"]
    auth = authorization["authorization"]
    calldata = transfer_with_authorization_data(
        address(auth["from"]),
        address(auth["to"]),
        int(auth["value"]),
        int(auth["validAfter"]),
        int(auth["validBefore"]),
        nonce,
        bytes.fromhex(authorization["signature"].removeprefix("0x")),
    )
    with pytest.raises(ExecutionReverted) as refused:
        demo_world.chain.rpc.call(demo_world.chain.usdc, calldata, block="pending")
    assert refused.value.reason == "FiatTokenV2: authorization is expired"


def test_a_listing_without_sandbox_refuses_sandbox_calls(
    demo_world: DemoWorld, seller_without_sandbox: str
) -> None:
    url = seller_without_sandbox + "?company=Acme"

    refused = httpx.get(url, headers=SANDBOX)
    assert refused.status_code == 400
    assert refused.json()["error"] == "sandbox_unavailable"
    assert "PAYMENT-REQUIRED" not in refused.headers

    live = payment_required(httpx.get(url))  # production: Base mainnet, as the catalog says
    assert live["accepts"] == [
        {
            "scheme": "exact",
            "network": "eip155:8453",
            "asset": BASE_MAINNET_USDC,
            "amount": "50000",
            "payTo": demo_world.live_pay_to,
            "maxTimeoutSeconds": 60,
            "extra": {"name": "USD Coin", "version": "2"},
        }
    ]


def test_production_payments_are_verified_but_never_settled(
    demo_world: DemoWorld, buyer: Buyer
) -> None:
    """Without X-Sandbox-Mode the seller quotes Base mainnet; paysign signs it as a live payment,
    the SDK facilitator checks it, and settlement is refused: no chain here moves mainnet USDC."""
    url = demo_world.sellers + "/market/v1/quote/live"
    terms = payment_required(httpx.get(url))
    assert terms["accepts"][0]["network"] == "eip155:8453"
    header = sign(demo_world, buyer, url, terms, sandbox=False)["paymentSignatureHeader"]

    answer = httpx.get(url, headers={"PAYMENT-SIGNATURE": header})

    assert answer.status_code == 402
    receipt = b64json(answer.headers["PAYMENT-RESPONSE"])
    assert receipt["success"] is False
    assert receipt["errorReason"] == "settlement_unavailable"
    assert receipt["network"] == "eip155:8453"
    assert transfers(demo_world, buyer.wallet) == []

    # A tampered live payment does not even pass verification.
    payload = b64json(header)
    payload["payload"]["authorization"]["value"] = "1"
    forged = base64.b64encode(json.dumps(payload).encode()).decode()
    rejected = httpx.get(url, headers={"PAYMENT-SIGNATURE": forged})
    assert rejected.status_code == 402
    assert "PAYMENT-RESPONSE" not in rejected.headers
    assert b64json(rejected.headers["PAYMENT-REQUIRED"])["error"] == (
        "invalid_exact_evm_payload_authorization_value_mismatch"
    )


def test_the_v1_seller_refuses_what_it_cannot_take(demo_world: DemoWorld, buyer: Buyer) -> None:
    url = demo_world.sellers + "/facts/v1/fact"
    malformed = httpx.get(url, headers={**SANDBOX, "X-PAYMENT": "not base64 JSON"})
    assert malformed.status_code == 402
    assert malformed.json()["error"] == "the X-PAYMENT header is malformed"

    # A v2 header where a v1 one belongs.
    v2_url = demo_world.sellers + "/market/v1/quote/v2"
    v2_terms = payment_required(httpx.get(v2_url, headers=SANDBOX))
    v2_header = sign(demo_world, buyer, v2_url, v2_terms)["paymentSignatureHeader"]
    wrong = httpx.get(url, headers={**SANDBOX, "X-PAYMENT": v2_header})
    assert wrong.status_code == 402
    assert wrong.json()["error"] == "X-PAYMENT must carry an x402 v1 payment payload"

    # Production: Base mainnet terms ("base"), signed live, verified, never settled.
    live = payment_required(httpx.get(url))
    assert live["accepts"][0]["network"] == "base"
    assert live["accepts"][0]["payTo"] == demo_world.live_pay_to
    header = sign(demo_world, buyer, url, live, sandbox=False)["paymentSignatureHeader"]
    refused = httpx.get(url, headers={"X-PAYMENT": header})
    assert refused.status_code == 402
    assert refused.json()["error"] == "settlement_unavailable"
    receipt = b64json(refused.headers["X-PAYMENT-RESPONSE"])
    assert (receipt["success"], receipt["network"]) == (False, "base")
    assert transfers(demo_world, buyer.wallet) == []
