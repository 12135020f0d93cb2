"""The connector without MCP sessions (``PAYSIGN_CONNECTOR_STATELESS``), as under ``paysign
serve --workers N``: two connector apps over one database stand for two workers, and one
official SDK client's requests go to each in turn, as the kernel may hand them out."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from paysign.app import create_app
from paysign.services import keys

from .conftest import Buyer, Served, World, make_buyer, replace_settings

HANDSHAKE_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
STREAMABLE_ACCEPT = {"Accept": "application/json, text/event-stream"}


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


@contextlib.contextmanager
def workers(world: World, *, stateless: bool, count: int = 2) -> Iterator[list[str]]:
    """``count`` connector apps, each built as a worker builds its own, over the world's
    database; the address of each one's connector."""
    runtime = replace_settings(world.runtime, connector_stateless=stateless, signer_process=False)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(Served(create_app(runtime))) for _ in range(count)]
        yield [f"{server.url}/mcp" for server in servers]


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next worker, keeping its path, headers and body; records the
    status each one answered."""

    def __init__(self, urls: list[str]) -> None:
        self._next = itertools.cycle([httpx2.URL(url) for url in urls])
        self._inner = httpx2.AsyncHTTPTransport()
        self.answers: list[tuple[str, int, str | None]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = next(self._next)
        request.url = request.url.copy_with(host=target.host, port=target.port)
        response = await self._inner.handle_async_request(request)
        session = response.headers.get("mcp-session-id")
        self.answers.append((request.method, response.status_code, session))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def round_robin_client(
    urls: list[str], api_key: str, transport: RoundRobin
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(
            transport=transport,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=httpx2.Timeout(30, read=60),
        ) as http,
        Client(streamable_http_client(urls[0], http_client=http), mode="legacy") as client,
    ):
        yield client


def session_not_found(failure: BaseException) -> bool:
    if isinstance(failure, BaseExceptionGroup):
        return any(session_not_found(inner) for inner in failure.exceptions)
    return "Session not found" in str(failure)


def test_two_workers_answer_one_client_in_turn(world: World, buyer: Buyer) -> None:
    before = world.chain.usdc_balance(bytes.fromhex(buyer.wallet.removeprefix("0x")))

    async def scenario() -> tuple[set[str], types.CallToolResult, RoundRobin]:
        with workers(world, stateless=True) as urls:
            transport = RoundRobin(urls)
            async with round_robin_client(urls, buyer.api_key, transport) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                paid = await client.call_tool(
                    "weather_forecast", {"city": "Paris", "units": "metric", "sandbox": True}
                )
                return names, paid, transport

    names, paid, transport = run(scenario())
    assert {"weather_forecast", "pay_x402", "search_bazaar"} <= names
    assert not paid.is_error, paid.content
    assert paid.structured_content is not None
    payment = paid.structured_content["payment"]
    assert payment["sellerReportsSettled"] is True and payment["amount"] == "2000"
    after = world.chain.usdc_balance(bytes.fromhex(buyer.wallet.removeprefix("0x")))
    assert before - after == 2000
    # initialize, initialized, tools/list, tools/call: each worker answered, none with a session
    # (the client opens no GET stream and sends no DELETE without one).
    assert [(method, status) for method, status, _ in transport.answers] == [
        ("POST", 200),
        ("POST", 202),
        ("POST", 200),
        ("POST", 200),
    ]
    assert all(session is None for _, _, session in transport.answers)


def test_with_sessions_the_other_worker_answers_404(world: World, buyer: Buyer) -> None:
    async def scenario() -> tuple[BaseException | None, RoundRobin]:
        with workers(world, stateless=False) as urls:
            transport = RoundRobin(urls)
            try:
                async with round_robin_client(urls, buyer.api_key, transport) as client:
                    await client.list_tools()
                    await client.list_tools()
            except Exception as exc:
                return exc, transport
            return None, transport

    failure, transport = run(scenario())
    assert failure is not None and session_not_found(failure), repr(failure)
    assert transport.answers[0][1] == 200 and transport.answers[0][2] is not None
    assert ("POST", 404, None) in transport.answers


def test_each_request_is_authenticated_on_its_own(world: World) -> None:
    buyer = make_buyer(world, funds=0)

    async def scenario() -> tuple[set[str], list[int]]:
        with workers(world, stateless=True, count=1) as (url,):
            async with round_robin_client([url], buyer.api_key, RoundRobin([url])) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
            statuses = []
            async with httpx2.AsyncClient(timeout=30) as http:
                tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
                for headers in (
                    {},
                    {"Authorization": "Bearer psk_" + "x" * 43},
                    {"Authorization": f"Bearer {buyer.api_key}"},
                ):
                    answer = await http.post(
                        url, json=tools_list, headers={**STREAMABLE_ACCEPT, **headers}
                    )
                    statuses.append(answer.status_code)
                    if answer.status_code == 401:
                        assert answer.json() == {"message": "Unauthorized"}
                        challenge = answer.headers["www-authenticate"]
                        assert challenge.startswith("Bearer ")
                        assert ("invalid_token" in challenge) == bool(headers)
                await asyncio.to_thread(
                    keys.revoke_key, world.runtime.db, world.runtime.clock, email=buyer.email
                )
                answer = await http.post(
                    url,
                    json=tools_list,
                    headers={**STREAMABLE_ACCEPT, "Authorization": f"Bearer {buyer.api_key}"},
                )
                statuses.append(answer.status_code)
            return names, statuses

    names, statuses = run(scenario())
    assert "pay_x402" in names
    # No credential, a bad one: 401; the key: answered with no initialize before it (nothing
    # to resume); the same key once revoked: 401, though it was good a request ago.
    assert statuses == [401, 401, 200, 401]


def test_the_get_stream_is_refused_and_initialize_opens_no_session(world: World) -> None:
    buyer = make_buyer(world, funds=0)
    auth = {"Authorization": f"Bearer {buyer.api_key}"}
    with workers(world, stateless=True, count=1) as (url,):
        stream = httpx.get(url, headers={**auth, "Accept": "text/event-stream"}, timeout=30)
        unauthenticated = httpx.get(url, headers={"Accept": "text/event-stream"}, timeout=30)
        init = httpx.post(url, json=HANDSHAKE_INIT, headers={**auth, **STREAMABLE_ACCEPT})
        ping = httpx.post(
            url,
            json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
            headers={**auth, **STREAMABLE_ACCEPT},
        )
        end = httpx.delete(url, headers=auth)
    assert stream.status_code == 405 and stream.headers["allow"] == "POST"
    assert "no GET stream" in stream.json()["error"]["message"]
    assert unauthenticated.status_code == 401
    assert init.status_code == 200 and "mcp-session-id" not in init.headers
    assert '"protocolVersion":"2025-06-18"' in init.text
    assert '"tools":{"listChanged":true}' in init.text  # still true for 2026-07-28 clients
    assert ping.status_code == 200 and '"result":{}' in ping.text
    assert end.status_code == 405  # no session to end
