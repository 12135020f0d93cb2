"""Terms bound to their seller: the resource the terms name is on the declared seller's host."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import REGISTRY, signature_body
from paysign.policy.binding import unbound_resource
from paysign.protocol.terms import parse_signature_request, resource_urls

SELLER = "https://api.example.com/weather?city=paris"


def resources_of(body: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return resource_urls(parse_signature_request(body, REGISTRY).terms)


def with_resource(url: str, *, version: int = 2) -> dict[str, Any]:
    body: dict[str, Any] = signature_body(version=version, seller_url=SELLER)
    if version == 2:
        body["paymentRequired"]["resource"]["url"] = url
    else:
        body["paymentRequired"]["accepts"][0]["resource"] = url
    return body


def test_resource_urls_v2_and_v1() -> None:
    assert resources_of(with_resource("https://a.example/x")) == (
        ("/paymentRequired/resource/url", "https://a.example/x"),
    )
    assert resources_of(with_resource("https://a.example/x", version=1)) == (
        ("/paymentRequired/accepts/0/resource", "https://a.example/x"),
    )
    v1 = with_resource("", version=1)
    assert resources_of(v1) == ()
    del v1["paymentRequired"]["accepts"][0]["resource"]
    assert resources_of(v1) == ()
    v1["paymentRequired"]["resource"] = {"url": "https://b.example/"}
    assert resources_of(v1) == (("/paymentRequired/resource/url", "https://b.example/"),)


@pytest.mark.parametrize(
    "resource",
    [
        "https://api.example.com/weather",
        "https://API.Example.com:443/other/path?x=1",
        "http://api.example.com/weather",  # both on their scheme's default port
        "https://api.example.com./weather",
        "https://user@api.example.com/weather",
        "/weather",  # relative: on the seller's host
        "weather",
        "mcp://tool/get_weather",  # names no web host
    ],
)
def test_resources_on_the_sellers_host(resource: str) -> None:
    assert unbound_resource(SELLER, resources_of(with_resource(resource))) is None


@pytest.mark.parametrize(
    ("resource", "host"),
    [
        ("https://evil.example/weather", "evil.example"),
        ("https://api.example.com.evil.example/weather", "api.example.com.evil.example"),
        ("https://api.example.com@evil.example/weather", "evil.example"),
        ("https://api.example.com:8443/weather", "api.example.com:8443"),
        ("http://api.example.com:443/weather", "api.example.com:443"),
        ("//evil.example/weather", "evil.example"),
        ("https://[::ffff:10.0.0.1]/", "10.0.0.1"),
    ],
)
def test_resources_on_another_host(resource: str, host: str) -> None:
    for version in (1, 2):
        unbound = unbound_resource(SELLER, resources_of(with_resource(resource, version=version)))
        assert unbound is not None
        assert (unbound.seller_host, unbound.resource_host) == ("api.example.com", host)
        assert host in unbound.reason
        assert unbound.pointer.endswith("/resource/url" if version == 2 else "/0/resource")


@pytest.mark.parametrize("resource", ['https://evil.example"/', "https://[::1/", "https://a:x/"])
def test_a_resource_url_with_no_valid_host_is_unbound(resource: str) -> None:
    unbound = unbound_resource(SELLER, resources_of(with_resource(resource)))
    assert unbound is not None and unbound.resource_host is None
    assert "host" in unbound.reason or "port" in unbound.reason


def test_the_seller_port_counts() -> None:
    seller = "https://api.example.com:8443/weather"
    assert unbound_resource(seller, (("/r", "https://api.example.com:8443/x"),)) is None
    unbound = unbound_resource(seller, (("/r", "https://api.example.com/x"),))
    assert unbound is not None and unbound.resource_host == "api.example.com"
