"""Caps hold under ≥100 simultaneous requests spread over two ``paysign serve`` processes that
share one database, and they survive a restart. Sandbox requests in the same burst never
consume the cap; testnet requests without the header do."""

from __future__ import annotations

import asyncio
import json
from contextlib import ExitStack

import httpx
import pytest

from conftest import ServeProcess, ok_json, paysign, signature_body

AMOUNT = 100_000  # 0.1 USDC
K = 9  # the daily cap fits exactly K live payments


async def burst(urls: list[str], key: str, live: int, sandbox: int) -> list[tuple[bool, int, str]]:
    """Fire every request at once, alternating servers; (sandbox?, status, problem slug)."""
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one(i: int, is_sandbox: bool) -> tuple[bool, int, str]:
            extra = {"X-Sandbox-Mode": "true"} if is_sandbox else {}
            response = await client.post(
                f"{urls[i % len(urls)]}/wallets/signatures",
                json=signature_body(amount=str(AMOUNT)),
                headers=headers | extra,
            )
            slug = response.json().get("type", "").rsplit("/", 1)[-1]
            return is_sandbox, response.status_code, slug

        kinds = [False] * live + [True] * sandbox
        return await asyncio.gather(*(one(i, s) for i, s in enumerate(kinds)))


@pytest.mark.slow
def test_two_processes_one_database_never_overspend(env: dict[str, str], tmp_path) -> None:
    ok_json(
        paysign(
            env,
            "admin",
            "create-account",
            "--email",
            "race@example.com",
            "--password",
            "long enough pass",
        )
    )
    key = ok_json(paysign(env, "admin", "issue-key", "--email", "race@example.com"))["apiKey"]
    document = ok_json(paysign(env, "admin", "get-policy", "--email", "race@example.com"))
    document["caps"] = {"perPayment": None, "daily": K * AMOUNT, "monthly": None}
    document["allow"] = ["api.example.com"]
    ok_json(
        paysign(
            env,
            "admin",
            "set-policy",
            "--email",
            "race@example.com",
            "--file",
            "-",
            stdin=json.dumps(document),
        )
    )

    with ExitStack() as stack:
        urls = [stack.enter_context(ServeProcess(env)) for _ in range(2)]
        results = asyncio.run(burst(urls, key, live=100, sandbox=20))

    live = [(status, slug) for is_sandbox, status, slug in results if not is_sandbox]
    assert live.count((200, "")) == K
    assert live.count((403, "spend-cap-exceeded")) == 100 - K
    assert [status for is_sandbox, status, _ in results if is_sandbox] == [200] * 20

    # After a restart the day's spend is still there: the cap is full.
    with ServeProcess(env) as url:
        again = asyncio.run(burst([url], key, live=5, sandbox=2))
    assert [(s, st) for s, st, _ in again] == [(False, 403)] * 5 + [(True, 200)] * 2
