"""The approvals queue's bound holds under a burst of made-up sellers spread over two
``paysign serve`` processes sharing one database: exactly the places left are taken."""

from __future__ import annotations

import asyncio
import secrets
from contextlib import ExitStack

import httpx
import pytest

from conftest import ServeProcess, ok_json, paysign, signature_body
from paysign.policy.decide import MAX_PENDING_SELLERS

LEFT = 3  # places left in the queue when the burst starts
BURST = 40


async def pay_all(urls: list[str], key: str, sellers: list[str]) -> list[str]:
    """Every payment at once, alternating servers; the problem slug of each answer."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=100)) as client:

        async def one(i: int, seller: str) -> str:
            response = await client.post(
                f"{urls[i % len(urls)]}/wallets/signatures",
                json=signature_body(seller_url=f"https://{seller}/quote"),
                headers=headers,
            )
            assert response.status_code == 403, response.text
            return str(response.json()["type"]).rsplit("/", 1)[1]

        return await asyncio.gather(*(one(i, s) for i, s in enumerate(sellers)))


@pytest.mark.slow
def test_a_burst_of_new_sellers_over_two_processes_fills_only_the_places_left(
    env: dict[str, str],
) -> None:
    email = "flood@example.com"
    ok_json(paysign(env, "admin", "create-account", "--email", email, "--password", "p" * 16))
    key = ok_json(paysign(env, "admin", "issue-key", "--email", email))["apiKey"]
    tag = secrets.token_hex(3)
    earlier = [f"early-{i}-{tag}.example.net" for i in range(MAX_PENDING_SELLERS - LEFT)]
    burst = [f"burst-{i}-{tag}.example.net" for i in range(BURST)]

    with ExitStack() as stack:
        urls = [stack.enter_context(ServeProcess(env)) for _ in range(2)]
        assert set(asyncio.run(pay_all(urls, key, earlier))) == {"allow-pending"}
        answers = asyncio.run(pay_all(urls, key, burst))
        # A seller that got in still answers allow-pending, on either process.
        admitted = [s for s, a in zip(burst, answers, strict=True) if a == "allow-pending"]
        assert asyncio.run(pay_all(urls, key, admitted * 2)) == ["allow-pending"] * 2 * LEFT

    assert answers.count("allow-pending") == LEFT
    assert answers.count("pending-approvals-full") == BURST - LEFT
    pending = ok_json(paysign(env, "admin", "get-policy", "--email", email))["pending"]
    assert sorted(pending) == sorted(f"{s}/quote" for s in earlier + admitted)
