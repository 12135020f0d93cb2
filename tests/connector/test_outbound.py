"""Outbound safety: non-public addresses refused (names, literals, redirects), size limits."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import httpx
import pytest

from paysign.app import create_app
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
    assert "127.0.0.1" in error["outboundDetail"]


# --- IPv4 wrapped in IPv6: unwrapped and judged (one classifier, policy.addresses) ----------


def _wrapped(v4: str) -> dict[str, str]:
    n = int(ipaddress.IPv4Address(v4))
    high, low = n >> 16, n & 0xFFFF
    return {
        "mapped": f"::ffff:{v4}",
        "mapped hex": f"::ffff:{high:x}:{low:x}",
        "compatible": f"::{v4}",
        "compatible hex": f"::{high:x}:{low:x}",
        "nat64": f"64:ff9b::{v4}",
        "nat64 local": f"64:ff9b:1::{high:x}:{low:x}",
        "6to4": f"2002:{high:x}:{low:x}::1",
        "teredo": f"2001:0:4136:e378:8000:63bf:{high ^ 0xFFFF:x}:{low ^ 0xFFFF:x}",
    }


@pytest.mark.parametrize("v4", ["10.0.0.1", "127.0.0.1", "169.254.169.254", "192.168.1.1"])
@pytest.mark.parametrize("kind", list(_wrapped("0.0.0.0")))
def test_a_private_address_in_any_ipv6_wrapper_is_refused(v4: str, kind: str) -> None:
    literal = _wrapped(v4)[kind]
    with pytest.raises(OutboundRefused) as caught:
        asyncio.run(checked_target(f"http://[{literal}]/latest/meta-data", STRICT))
    assert caught.value.reason == "private-address"
    assert v4 in caught.value.detail  # the message names the address it wraps


@pytest.mark.parametrize("literal", ["fec0::1", "fec0:0:0:ffff::1", "feff::1"])
def test_site_local_ipv6_is_refused(literal: str) -> None:
    with pytest.raises(OutboundRefused) as caught:
        asyncio.run(checked_target(f"http://[{literal}]/", STRICT))
    assert caught.value.reason == "private-address"


@pytest.mark.parametrize(
    ("kind", "called"),
    [
        ("mapped", True),
        ("mapped hex", True),
        ("nat64", True),
        ("compatible", False),
        ("compatible hex", False),
        ("nat64 local", False),
        ("6to4", False),
        ("teredo", False),
    ],
)
def test_wrappers_of_a_public_address(kind: str, called: bool) -> None:
    """Mapped and NAT64 are how an IPv4 seller looks to a dual-stack or DNS64 host: judged by
    the address inside. The deprecated or local wrappers are refused whatever they carry."""
    url = f"https://[{_wrapped('8.8.8.8')[kind]}]/x"
    if called:
        pinned, _host, _sni = asyncio.run(checked_target(url, STRICT))
        assert pinned.startswith("https://[")
    else:
        with pytest.raises(OutboundRefused):
            asyncio.run(checked_target(url, STRICT))


# --- the connector pays through the signing use case: its checks apply -----------------------


def _seller_402(resource: str) -> dict[str, Any]:
    from conftest import signature_body

    required = signature_body(network="base-sepolia", version=1)["paymentRequired"]
    required["accepts"][0]["resource"] = resource  # type: ignore[index]
    return required  # type: ignore[return-value]


def _pay(runtime: Any, signing_store: Any, api_key: str, url: str, handler: Any) -> Any:
    from paysign.connector.payment import SellerCall, pay
    from paysign.services.signing import SigningDeps, by_api_key

    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    outbound = Outbound(OutboundLimits(allow_private=True), transport=httpx.MockTransport(handler))
    call = SellerCall("GET", url, sandbox=True)
    return asyncio.run(
        pay(deps, outbound, by_api_key(api_key), call, portal_url="https://portal.example")
    )


def test_connector_refuses_terms_for_another_host(runtime, signing_store, account) -> None:
    from paysign.connector.payment import ToolFailure
    from paysign.store.schema import refusals, signatures

    def seller(request: httpx.Request) -> httpx.Response:
        assert "payment-signature" not in request.headers and "x-payment" not in request.headers
        return httpx.Response(402, json=_seller_402("https://evil.example/weather"))

    with pytest.raises(ToolFailure) as caught:
        _pay(runtime, signing_store, account["api_key"], "https://api.example.com/weather", seller)
    assert caught.value.kind == "seller-resource-mismatch"
    assert caught.value.extra["resourceHost"] == "evil.example"
    assert "evil.example" in caught.value.what_to_do
    with runtime.db.read() as conn:
        assert conn.execute(signatures.select()).first() is None
        assert conn.execute(refusals.select()).first() is None


def test_connector_does_not_call_a_url_the_policy_cannot_judge(
    runtime, signing_store, account
) -> None:
    from paysign.connector.payment import ToolFailure

    called: list[str] = []

    def seller(request: httpx.Request) -> httpx.Response:
        called.append(str(request.url))
        return httpx.Response(200)

    for url in ("https://api.example.com/admin%00", "https://api.example.com/v1/%252e%252e/x"):
        with pytest.raises(ToolFailure) as caught:
            _pay(runtime, signing_store, account["api_key"], url, seller)
        assert caught.value.kind == "invalid-seller-url"
        assert "path" in caught.value.detail
    assert called == []
