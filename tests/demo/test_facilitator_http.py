"""The demo facilitator's HTTP surface, as the SDK's ``HTTPFacilitatorClient`` and anyone else
reaches it: what it supports, and clear answers to requests it cannot take."""

from __future__ import annotations

import httpx

from .conftest import SANDBOX, DemoWorld, payment_required


def test_supported_lists_both_versions_and_the_signer(demo_world: DemoWorld) -> None:
    supported = httpx.get(f"{demo_world.stack.facilitator_url}/supported").json()
    kinds = {(kind["x402Version"], kind["scheme"], kind["network"]) for kind in supported["kinds"]}
    assert kinds == {
        (2, "exact", "eip155:84532"),
        (2, "exact", "eip155:8453"),
        (1, "exact", "base-sepolia"),
        (1, "exact", "base"),
    }
    assert supported["signers"] == {"eip155:*": [demo_world.stack.facilitator.address]}


def test_malformed_requests_get_400(demo_world: DemoWorld) -> None:
    url = f"{demo_world.stack.facilitator_url}/verify"
    assert httpx.post(url, content=b"not json").status_code == 400
    assert httpx.post(url, json=[]).status_code == 400
    answer = httpx.post(url, json={"x402Version": 2, "paymentPayload": {"x402Version": 2}})
    assert answer.status_code == 400
    assert "paymentRequirements" in answer.json()["error"]


def test_an_unknown_network_is_not_valid(demo_world: DemoWorld) -> None:
    terms = payment_required(httpx.get(demo_world.sellers + "/market/v1/quote/x", headers=SANDBOX))
    requirements = {**terms["accepts"][0], "network": "eip155:1"}
    payload = {
        "x402Version": 2,
        "accepted": requirements,
        "payload": {"signature": "0x", "authorization": {}},
    }
    body = {"x402Version": 2, "paymentPayload": payload, "paymentRequirements": requirements}
    verified = httpx.post(f"{demo_world.stack.facilitator_url}/verify", json=body)
    assert verified.status_code == 200
    assert verified.json() == {"isValid": False, "invalidReason": "unsupported_scheme"}
    settled = httpx.post(f"{demo_world.stack.facilitator_url}/settle", json=body)
    assert settled.status_code == 200
    assert settled.json()["success"] is False
