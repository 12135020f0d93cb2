"""``POST /wallets/testnet/funds`` over real HTTP, on the real dev chain."""

from __future__ import annotations

import httpx
import pytest

from conftest import LiveServer
from paysign.app import create_app


@pytest.fixture
def faucet_http(chained_runtime):
    with (
        LiveServer(create_app(chained_runtime)) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        yield client


def test_test_funds_then_429_with_retry_after(faucet_http, account, chained_runtime) -> None:
    headers = {"Authorization": f"Bearer {account['api_key']}"}
    first = faucet_http.post("/wallets/testnet/funds", headers=headers)
    assert first.status_code == 200, first.text
    body = first.json()
    assert set(body) == {"transactionHash", "network", "token"}
    assert body["network"] == "eip155:84532"
    assert body["token"] == chained_runtime.sandbox_chain.usdc_hex
    assert body["transactionHash"].startswith("0x") and len(body["transactionHash"]) == 66

    second = faucet_http.post("/wallets/testnet/funds", headers=headers)
    assert second.status_code == 429
    assert second.headers["content-type"] == "application/problem+json"
    assert int(second.headers["retry-after"]) == 24 * 3600
    assert second.json()["type"].endswith("/test-funds-rate-limited")


def test_test_funds_need_a_valid_key(faucet_http) -> None:
    refused = faucet_http.post(
        "/wallets/testnet/funds", headers={"Authorization": "Bearer psk_" + "x" * 43}
    )
    assert refused.status_code == 401 and refused.json() == {"message": "Unauthorized"}
    assert faucet_http.post("/wallets/testnet/funds").status_code == 401


def test_chain_down_is_a_503_problem_and_keeps_the_window(chained_runtime, account) -> None:
    import dataclasses

    from paysign.chain.testnet import SandboxChain

    dead = SandboxChain(
        "http://127.0.0.1:9",
        usdc=chained_runtime.sandbox_chain.usdc,
        treasury_key=bytes(31) + b"\x01",
        timeout=1,
    )
    headers = {"Authorization": f"Bearer {account['api_key']}"}
    down = dataclasses.replace(chained_runtime, sandbox_chain=dead)
    with LiveServer(create_app(down)) as server:
        refused = httpx.post(f"{server.url}/wallets/testnet/funds", headers=headers, timeout=30)
    assert refused.status_code == 503
    assert refused.json()["type"].endswith("/sandbox-chain-unavailable")
    with LiveServer(create_app(chained_runtime)) as server:
        granted = httpx.post(f"{server.url}/wallets/testnet/funds", headers=headers, timeout=30)
    assert granted.status_code == 200, granted.text
    dead.close()
