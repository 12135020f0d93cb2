"""Outbound safety: non-public addresses refused (names, literals, redirects), size limits."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from paysign.api.app import create_app
from paysign.connector.outbound import (
    Outbound,
    OutboundLimits,
    OutboundRefused,
    checked_target,
)

from .conftest import Buyer, Served, World, connect, replace_settings

STRICT = OutboundLimits(allow_private=False, max_response_bytes=1000, timeout_seconds=5)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8402/x",
        "http://localhost/x",  # by DNS
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://10.0.0.5/x",
        "http://192.168.1.1/x",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/x",
        "http://0.0.0.0/x",
        "ftp://example.com/x",
        "http://user:pw@8.8.8.8/x",
    ],
)
def test_non_public_targets_are_refused(url: str) -> None:
    with pytest.raises(OutboundRefused):
        asyncio.run(checked_target(url, STRICT))


def test_public_target_is_pinned_to_the_checked_address() -> None:
    pinned, host, sni = asyncio.run(checked_target("https://8.8.8.8/a?b=1", STRICT))
    assert (pinned, host, sni) == ("https://8.8.8.8:443/a?b=1", "8.8.8.8", "8.8.8.8")


def _outbound(handler: Any) -> Outbound:
    return Outbound(STRICT, transport=httpx.MockTransport(handler))


def test_a_redirect_to_a_private_address_is_refused() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(302, headers={"location": "http://127.0.0.1/admin"})

    with pytest.raises(OutboundRefused) as caught:
        asyncio.run(_outbound(handler).request("GET", "http://8.8.8.8/start"))
    assert caught.value.reason == "private-address"
    assert seen == ["http://8.8.8.8/start"]


def test_redirects_are_bounded_and_payments_stay_on_their_origin() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path == "/a":
            return httpx.Response(307, headers={"location": "http://1.1.1.1/b"})
        return httpx.Response(200, json={"ok": True})

    response = asyncio.run(
        _outbound(handler).request("POST", "http://8.8.8.8/a", headers={"PAYMENT-SIGNATURE": "x"})
    )
    assert response.status == 200 and response.url == "http://1.1.1.1/b"
    assert "payment-signature" in sent[0].headers
    assert "payment-signature" not in sent[1].headers
    assert sent[1].headers["host"] == "1.1.1.1"

    def loop(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"location": "/again"})

    with pytest.raises(OutboundRefused) as caught:
        asyncio.run(_outbound(loop).request("GET", "http://8.8.8.8/a"))
    assert caught.value.reason == "too-many-redirects"


def test_response_size_is_limited() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"x" * 5000)

    with pytest.raises(OutboundRefused) as caught:
        asyncio.run(_outbound(handler).request("GET", "http://8.8.8.8/big"))
    assert caught.value.reason == "too-large"


def test_connector_refuses_loopback_sellers_unless_allowed(world: World, buyer: Buyer) -> None:
    strict = replace_settings(world.runtime, connector_allow_private=False)
    with Served(create_app(strict)) as server:

        async def scenario() -> Any:
            async with connect(f"{server.url}/mcp", buyer.api_key) as client:
                return await client.call_tool(
                    "pay_x402", {"url": f"{world.sellers}/facts/v1/fact", "sandbox": True}
                )

        result = asyncio.run(scenario())
    assert result.is_error
    error = dict(result.structured_content or {})["error"]
    assert error["type"] == "outbound-private-address"
    assert "127.0.0.1" in error["detail"]
