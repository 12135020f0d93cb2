"""Spec rule 6 in the transport: a paid request that gets no answer is sent again with the
same signature until the signature is about to expire, never signed again.

:class:`PaysignAuth <paysign.client.auth.PaysignAuth>` marks each paid request with its
attempt; these transports retry only those, and read their answers in full so that one cut off
mid-body counts as no answer — up to the attempt's ``max_answer_bytes`` as sent (the auth
flow then counts them decoded), so an endless answer is refused, never retried.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import httpx

from paysign.client.answers import AnswerLimits
from paysign.client.auth import ATTEMPT_EXTENSION, PaidAttempt
from paysign.client.payment_errors import SellerUnreachable

__all__ = ["AsyncPaidRetryTransport", "PaidRetryTransport"]

_FIRST_RETRY_DELAY = 0.2
_MAX_RETRY_DELAY = 4.0


def _buffered(response: httpx.Response, raw: bytes) -> httpx.Response:
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        stream=httpx.ByteStream(raw),
        extensions=response.extensions,
    )


def _within(chunks: Iterator[bytes], limits: AnswerLimits) -> Iterator[bytes]:
    size = 0
    for chunk in chunks:
        size += len(chunk)
        limits.check(size)
        yield chunk


async def _awithin(chunks: AsyncIterator[bytes], limits: AnswerLimits) -> AsyncIterator[bytes]:
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        limits.check(size)
        yield chunk


def _give_up(attempt: PaidAttempt, exc: Exception) -> SellerUnreachable:
    return SellerUnreachable(
        f"no answer from {attempt.seller_url} before the signature expired "
        f"({attempt.sends} attempts with the same signature): {exc!r}",
        nonce=attempt.signature.nonce,
        valid_before=attempt.signature.valid_before,
        attempts=attempt.sends,
    )


class PaidRetryTransport(httpx.BaseTransport):
    """Wraps a transport: a paid request (marked by :class:`PaysignAuth`) that fails in transit
    is sent again, same signature, until it is about to expire. Its answer is read in full here,
    so a connection dropped mid-answer is retried too. Other requests pass through."""

    def __init__(self, transport: httpx.BaseTransport | None = None) -> None:
        self.transport = transport or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        attempt = request.extensions.get(ATTEMPT_EXTENSION)
        if not isinstance(attempt, PaidAttempt):
            return self.transport.handle_request(request)
        delay = _FIRST_RETRY_DELAY
        while True:
            attempt.sends += 1
            try:
                response = self.transport.handle_request(request)
                try:
                    limits = attempt.answer_limits(response)
                    limits.check_declared(response)
                    raw = b"".join(_within(response.iter_raw(), limits))
                finally:
                    response.close()
                return _buffered(response, raw)
            except httpx.TransportError as exc:
                if not attempt.usable(time.time() + delay):
                    raise _give_up(attempt, exc) from exc
            time.sleep(delay)
            delay = min(delay * 2, _MAX_RETRY_DELAY)

    def close(self) -> None:
        self.transport.close()


class AsyncPaidRetryTransport(httpx.AsyncBaseTransport):
    """:class:`PaidRetryTransport` for ``httpx.AsyncClient``."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.transport = transport or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        attempt = request.extensions.get(ATTEMPT_EXTENSION)
        if not isinstance(attempt, PaidAttempt):
            return await self.transport.handle_async_request(request)
        delay = _FIRST_RETRY_DELAY
        while True:
            attempt.sends += 1
            try:
                response = await self.transport.handle_async_request(request)
                try:
                    limits = attempt.answer_limits(response)
                    limits.check_declared(response)
                    raw = b"".join(
                        [chunk async for chunk in _awithin(response.aiter_raw(), limits)]
                    )
                finally:
                    await response.aclose()
                return _buffered(response, raw)
            except httpx.TransportError as exc:
                if not attempt.usable(time.time() + delay):
                    raise _give_up(attempt, exc) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_RETRY_DELAY)

    async def aclose(self) -> None:
        await self.transport.aclose()
