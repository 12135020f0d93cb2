"""Outbound HTTP for the connector: the only place paysign calls a seller (DESIGN 7.11).

Every hop is checked before it is made: the host is resolved once, every address it resolves to
must be globally routable (no private, loopback, link-local, site-local, shared, reserved,
multicast or unspecified address, and none of those wrapped in IPv6: ``policy.addresses`` is
the one classifier), and the connection goes to that checked address — the name is not looked
up a second time, so a DNS answer cannot change between the check and the connect (rebinding).
Redirects are followed by hand, at most ``max_redirects`` hops, each hop checked the same way;
a hop to another origin carries none of the caller's headers but three harmless ones.
Responses are read up to ``max_response_bytes`` and the whole exchange has one deadline.

``allow_private`` (``PAYSIGN_CONNECTOR_ALLOW_PRIVATE=1``) turns the address check off, for tests
and the local demo.

    >>> is_public_address("8.8.8.8"), is_public_address("10.0.0.1"), is_public_address("::1")
    (True, False, False)
    >>> is_public_address("169.254.169.254"), is_public_address("100.64.0.1")
    (False, False)
    >>> is_public_address("::ffff:a00:1"), is_public_address("64:ff9b::a9fe:a9fe")
    (False, False)
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from paysign.policy.addresses import embedded_ipv4, is_public_address

REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: The only headers carried to another origin on a redirect. Any other header the caller
#: gave may be a credential for the first origin (a payment, a cookie, an API key under any
#: name): none is passed on. These three only describe the request and what it wants back.
_CROSS_ORIGIN_HEADERS = frozenset({"accept", "content-type", "x-sandbox-mode"})


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


class OutboundRefused(Exception):
    """The connector will not make this call (address not allowed, too big, too slow...).

    ``detail`` may quote what a seller chose (a redirect's target, its server's protocol
    error): it is for a field of its own, cut short; ``plain`` says the same in paysign's
    words only.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail

    @property
    def plain(self) -> str:
        return _PLAIN_REASONS.get(self.reason, "the call could not be made")


_PLAIN_REASONS = {
    "network": "the connection failed or was cut off before the whole answer came",
    "timeout": "no whole answer came in time",
    "dns": "a host name could not be resolved",
    "too-large": "the answer was larger than the connector reads",
    "too-many-redirects": "there were too many redirects",
    "private-address": "an address was private, loopback or otherwise not public",
    "scheme": "a URL was not http or https",
    "url": "a URL could not be called",
}


@dataclass(frozen=True, slots=True)
class OutboundLimits:
    allow_private: bool = False
    max_response_bytes: int = 1024 * 1024
    timeout_seconds: float = 20.0
    max_redirects: int = 3


@dataclass(frozen=True, slots=True)
class FetchedResponse:
    url: str  # the final URL (after redirects)
    status: int
    headers: httpx.Headers
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


async def _resolve(host: str, port: int) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OutboundRefused("dns", f"the host {host} could not be resolved ({exc})") from None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise OutboundRefused("dns", f"the host {host} has no address")
    return list(dict.fromkeys(addresses))


async def checked_target(url: str, limits: OutboundLimits) -> tuple[str, str, str | None]:
    """``(url to connect to, Host header, TLS server name)`` for ``url``, after the checks.

    With the check on, the URL is rewritten to the checked IP address; the Host header and the
    TLS server name (SNI and certificate check) stay those of the original host name.
    """
    try:
        parts = urlsplit(url)
        given_port = parts.port
    except ValueError as exc:  # a bracketed host that is no IPv6 address, a port out of range
        raise OutboundRefused(
            "url", f"{url[:200]!r} is not a URL that can be called ({exc})"
        ) from None
    if parts.scheme not in ("http", "https"):
        raise OutboundRefused("scheme", f"only http and https URLs can be called, not {url!r}")
    host = parts.hostname
    if not host:
        raise OutboundRefused("url", f"{url!r} has no host")
    if parts.username or parts.password:
        raise OutboundRefused("url", "URLs with credentials in them are not called")
    port = given_port or (443 if parts.scheme == "https" else 80)
    host_header = parts.netloc.rpartition("@")[2]
    if limits.allow_private:
        return url, host_header, None
    addresses = await _resolve(host, port)
    refused = [a for a in addresses if not is_public_address(a)]
    if refused:
        inner = embedded_ipv4(ipaddress.ip_address(refused[0]))
        wrapped = f" (which wraps {inner})" if inner is not None else ""
        raise OutboundRefused(
            "private-address",
            f"{host} resolves to {refused[0]}{wrapped}, a private, loopback, link-local or "
            "otherwise non-public address; the connector only calls public sellers",
        )
    ip = ipaddress.ip_address(addresses[0])
    literal = f"[{ip}]" if ip.version == 6 else str(ip)
    pinned = urlunsplit((parts.scheme, f"{literal}:{port}", parts.path, parts.query, ""))
    return pinned, host_header, host if parts.scheme == "https" else None


class Outbound:
    """An HTTP client for seller calls with the checks above."""

    def __init__(
        self, limits: OutboundLimits, *, transport: httpx.AsyncBaseTransport | None = None
    ):
        self.limits = limits
        self._transport = transport

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        timeout_seconds: float | None = None,
    ) -> FetchedResponse:
        """The answer to one request; ``timeout_seconds`` shortens the limits' deadline."""
        seconds = min(timeout_seconds or self.limits.timeout_seconds, self.limits.timeout_seconds)
        deadline = time.monotonic() + seconds
        try:
            async with asyncio.timeout(seconds):
                return await self._request(method, url, headers or {}, content, deadline)
        except TimeoutError:
            raise OutboundRefused("timeout", f"{url} did not answer within {seconds:g} s") from None

    async def _request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        content: bytes | None,
        deadline: float,
    ) -> FetchedResponse:
        timeout = httpx.Timeout(max(0.1, deadline - time.monotonic()))
        async with httpx.AsyncClient(
            transport=self._transport, follow_redirects=False, timeout=timeout, trust_env=False
        ) as client:
            for _hop in range(self.limits.max_redirects + 1):
                target, host_header, server_name = await checked_target(url, self.limits)
                extensions = {"sni_hostname": server_name} if server_name else {}
                try:
                    request = client.build_request(
                        method,
                        target,
                        headers={**headers, "Host": host_header},
                        content=content,
                        extensions=extensions,
                    )
                except ValueError as exc:  # a header httpx cannot encode
                    raise OutboundRefused("url", f"{url} cannot be called: {exc}") from None
                try:
                    response = await client.send(request, stream=True)
                except httpx.HTTPError as exc:
                    raise OutboundRefused("network", f"calling {url} failed: {exc}") from None
                try:
                    if response.status_code in REDIRECTS and "location" in response.headers:
                        previous, url = url, urljoin(url, response.headers["location"])
                        if _origin(previous) != _origin(url):
                            headers = {
                                k: v
                                for k, v in headers.items()
                                if k.lower() in _CROSS_ORIGIN_HEADERS
                            }
                        if response.status_code == 303 or (
                            response.status_code in (301, 302) and method != "GET"
                        ):
                            method, content = "GET", None
                            headers = {
                                k: v for k, v in headers.items() if k.lower() != "content-type"
                            }
                        continue
                    body = await self._read_limited(response, url)
                    return FetchedResponse(url, response.status_code, response.headers, body)
                finally:
                    await response.aclose()
            raise OutboundRefused(
                "too-many-redirects", f"more than {self.limits.max_redirects} redirects"
            )

    async def _read_limited(self, response: httpx.Response, url: str) -> bytes:
        limit = self.limits.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise OutboundRefused("too-large", f"{url} sent more than {limit} bytes")
        body = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise OutboundRefused("too-large", f"{url} sent more than {limit} bytes")
        except httpx.HTTPError as exc:
            raise OutboundRefused("network", f"reading {url} failed: {exc}") from None
        return bytes(body)
