"""``paysign demo`` as a newcomer runs it: one command starts the service (dev chain, database,
demo catalog), the facilitator and the sellers; a first paid request goes through; Ctrl-C
stops all of it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import PAYSIGN, free_port, ok_json, paysign
from paysign.chain.devchain import DEV_TREASURY_KEY, USDC_ADDRESS
from paysign.chain.testnet import SandboxChain
from paysign.chain.treasury import parse_private_key

from .conftest import SANDBOX, address, b64json, payment_required

PASSWORD = "correct horse battery"


async def search_bazaar(mcp_url: str, api_key: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {api_key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(mcp_url, http_client=http)) as client,
    ):
        result = await client.call_tool("search_bazaar", {"query": "fact"})
    assert not result.is_error, result.content
    return dict(result.structured_content or {})


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"paysign demo did not start:\n{log.read_text()}")
        time.sleep(0.1)


def test_paysign_demo_runs_everything_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    data_dir = tmp_path / "var"
    ports: set[int] = set()
    while len(ports) < 3:  # three distinct ports (the OS may hand one out twice)
        ports.add(free_port())
    service_port, sellers_port, facilitator_port = sorted(ports)
    service = f"http://127.0.0.1:{service_port}"
    sellers = f"http://127.0.0.1:{sellers_port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env |= {
        "PAYSIGN_DATA_DIR": str(data_dir),
        "PAYSIGN_DEMO_SELLERS_URL": sellers,
        "PAYSIGN_DEMO_FACILITATOR_PORT": str(facilitator_port),
    }
    log = tmp_path / "demo.log"  # a file, not a pipe: a busy server never blocks on it
    with log.open("wb") as output:
        proc = subprocess.Popen(
            [PAYSIGN, "demo", "--port", str(service_port)],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_up(f"{sellers}/", proc, log)
        # The banner follows the last server's start by a moment: wait for it, don't race it.
        deadline = time.monotonic() + 15
        while "paysign demo is running" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.05)

        # The service, with the demo catalog pointing at the sellers.
        assert httpx.get(f"{service}/healthz").status_code == 200
        catalog = httpx.get(f"{service}/catalog/full.json").json()["catalog"]
        assert {entry["name"] for entry in catalog} >= {"market_quote", "random_fact"}
        assert all(entry["url"].startswith(sellers) for entry in catalog)
        # The facilitator, as the SDK's HTTP client reads it.
        supported = httpx.get(f"http://127.0.0.1:{facilitator_port}/supported").json()
        kinds = {(kind["x402Version"], kind["network"]) for kind in supported["kinds"]}
        assert kinds == {(2, "eip155:84532"), (2, "eip155:8453"), (1, "base-sepolia"), (1, "base")}

        # The walkthrough of docs/demo.md: an account, a key, test USDC, one paid request.
        account = ok_json(
            paysign(
                env, "admin", "create-account", "--email", "new@example.com", "--password", PASSWORD
            )
        )
        api_key = ok_json(paysign(env, "admin", "issue-key", "--email", "new@example.com"))[
            "apiKey"
        ]
        info = ok_json(paysign(env, "devchain", "info"))
        chain = SandboxChain(
            info["rpcUrl"], usdc=USDC_ADDRESS, treasury_key=parse_private_key(DEV_TREASURY_KEY)
        )
        try:
            chain.send_usdc(address(account["walletAddress"]), 100_000)
        finally:
            chain.close()
        url = f"{sellers}/weather/v1/forecast/Lisbon"
        terms = payment_required(httpx.get(url, headers=SANDBOX))
        signed = httpx.post(
            f"{service}/wallets/signatures",
            json={"sellerUrl": url, "paymentRequired": terms},
            headers={"Authorization": f"Bearer {api_key}", **SANDBOX},
        )
        assert signed.status_code == 200, signed.text
        header = signed.json()["paymentSignatureHeader"]
        paid = httpx.get(url, headers={**SANDBOX, "PAYMENT-SIGNATURE": header}, timeout=30)
        assert paid.status_code == 200, paid.text
        assert paid.json()["city"] == "Lisbon"
        assert b64json(paid.headers["PAYMENT-RESPONSE"])["success"] is True

        # The connector's search_bazaar reads the demo's own index, offline.
        assert "bazaar" in log.read_text()
        found = asyncio.run(asyncio.wait_for(search_bazaar(f"{service}/mcp", api_key), 60))
        assert [r["url"] for r in found["results"]] == [f"{sellers}/facts/v1/fact"]

        started = time.monotonic()
        proc.send_signal(signal.SIGINT)  # a terminal's Ctrl-C
        assert proc.wait(timeout=30) == 0, log.read_text()
        stop_seconds = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    output = log.read_text()
    assert stop_seconds < 15, output
    for url in (f"{service}/healthz", f"{sellers}/", f"http://127.0.0.1:{facilitator_port}/"):
        try:
            httpx.get(url, timeout=1)
        except httpx.TransportError:
            continue
        raise AssertionError(f"{url} still answers after Ctrl-C")
    # The service stopped its dev chain as `paysign serve` does: state dumped, nothing running.
    assert not (data_dir / "devchain" / "running.json").exists()
    assert json.loads((data_dir / "devchain" / "state.json").read_bytes())
    assert paysign(env, "devchain", "info").returncode != 0
    assert api_key not in output
