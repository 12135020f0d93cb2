"""``GET /metrics``: the Prometheus scrape, for the operator's collector only.

With ``PAYSIGN_METRICS_TOKEN`` set, every client must send ``Authorization: Bearer <token>``
(compared in constant time); a missing or wrong one is a 401 problem. Without it, only a
client on this machine is answered and anyone else gets the 404 of an unknown path.

"On this machine" is the peer address uvicorn puts in the ASGI scope, and only when the
request carries no proxy header: a reverse proxy on the same host connects from loopback for
every client it forwards, and when proxies are trusted (``PAYSIGN_TRUSTED_PROXIES``) uvicorn
replaces the peer address with the one the forwarding header claims. A request that came
through a proxy is therefore never taken for a local one; scrape through a proxy with the
token.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from paysign import metrics
from paysign.http.problems import problem_response
from paysign.services.keys import bearer_token

#: Headers a proxy adds to what it forwards (RFC 7239 and the common ones): any of them says a
#: request came through one. A proxy that sets only the scheme (``X-Forwarded-Proto``) or a
#: CDN's own header is as much a proxy as one that names the client.
FORWARDING_HEADERS = frozenset(
    {
        b"forwarded",
        b"x-forwarded-for",
        b"x-forwarded-host",
        b"x-forwarded-proto",
        b"x-forwarded-port",
        b"x-forwarded-server",
        b"x-forwarded-scheme",
        b"x-original-forwarded-for",
        b"x-real-ip",
        b"x-client-ip",
        b"x-cluster-client-ip",
        b"true-client-ip",
        b"cf-connecting-ip",
        b"fastly-client-ip",
        b"via",
    }
)


def is_local_client(scope: Scope) -> bool:
    """The peer is a loopback address and the request names no forwarded client."""
    client = scope.get("client")
    if not client:
        return False
    if any(name in FORWARDING_HEADERS for name, _ in scope.get("headers", [])):
        return False
    try:
        address = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def make_metrics_endpoint(
    token: str | None, problem_base: str
) -> Callable[[Request], Awaitable[Response]]:
    expected = token.encode() if token else None

    async def metrics_endpoint(request: Request) -> Response:
        if expected is not None:
            supplied = bearer_token(request.headers.get("authorization"))
            if supplied is None or not hmac.compare_digest(supplied.encode(), expected):
                return problem_response(
                    problem_base,
                    "metrics-token-required",
                    "send the metrics token as Authorization: Bearer <token>",
                    headers={"WWW-Authenticate": "Bearer"},
                )
        elif not is_local_client(request.scope):
            return problem_response(problem_base, "not-found", f"nothing at {request.url.path}")
        # Reading every worker's files (multi-process mode) is file I/O: off the event loop.
        body, content_type = await run_in_threadpool(metrics.scrape)
        return Response(body, headers={"Content-Type": content_type})

    return metrics_endpoint
