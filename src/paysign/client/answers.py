"""Reading a seller's answers within limits. The client holds two kinds of answer whole in
memory: a 402 (its terms, in the body for a v1 seller) and the answer to a paid request (so
that one cut off mid-body counts as no answer). A seller decides how long either is, and
httpx's timeout applies to each read, not to the whole body, so without these limits one
endless answer grows the client until it dies.

- A 402's body: at most :data:`PAYMENT_REQUIRED_MAX_BYTES`, whole within the request's read
  timeout (checked as each part arrives).
- A paid answer: at most ``max_answer_bytes`` (default :data:`DEFAULT_MAX_ANSWER_BYTES`),
  counted as the caller will see it, after any ``Content-Encoding`` is undone, so a small
  compressed body cannot expand past the limit either.

Past a limit the client stops reading and raises
:class:`~paysign.client.payment_errors.AnswerLimitExceeded`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from paysign.client.payment import Payment
from paysign.client.payment_errors import AnswerLimitExceeded

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "PAYMENT_REQUIRED_MAX_BYTES",
    "AnswerLimits",
    "aread_within",
    "read_within",
]

#: A 402 carries JSON terms; the connector reads any seller's answer up to the same size.
PAYMENT_REQUIRED_MAX_BYTES = 1024 * 1024
#: Paid answers are often files; the caller can raise this (``max_answer_bytes``).
DEFAULT_MAX_ANSWER_BYTES = 16 * 1024 * 1024
#: A 402's body must be whole within this when the caller turned httpx's timeouts off.
UNTIMED_PAYMENT_REQUIRED_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class AnswerLimits:
    """How much of one answer the client reads, and by when."""

    max_bytes: int
    deadline: float | None  # time.monotonic(); None: no overall deadline
    seller_url: str
    payment: Payment | None  # None for a 402: nothing was signed yet

    @classmethod
    def for_payment_required(cls, response: httpx.Response) -> AnswerLimits:
        timeouts = response.request.extensions.get("timeout") or {}
        seconds = timeouts.get("read") or UNTIMED_PAYMENT_REQUIRED_SECONDS
        return cls(
            PAYMENT_REQUIRED_MAX_BYTES,
            time.monotonic() + seconds,
            str(response.request.url),
            None,
        )

    def exceeded(self, reason: str) -> AnswerLimitExceeded:
        return AnswerLimitExceeded(
            reason, seller_url=self.seller_url, limit=self.max_bytes, payment=self.payment
        )

    def check_declared(self, response: httpx.Response) -> None:
        """Refuse before reading when the seller says the body is too large. A declared
        length counts the encoded body, so it says nothing when an encoding is undone."""
        declared = response.headers.get("content-length", "")
        encoded = response.headers.get("content-encoding", "identity") != "identity"
        if (
            not encoded
            and declared.isascii()
            and declared.isdigit()
            and int(declared) > self.max_bytes
        ):
            raise self.exceeded("too-large")

    def check(self, size: int) -> None:
        if size > self.max_bytes:
            raise self.exceeded("too-large")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self.exceeded("too-slow")


def read_within(response: httpx.Response, limits: AnswerLimits) -> None:
    """Read ``response`` whole (``response.content`` works afterwards), or close it and raise
    :class:`AnswerLimitExceeded`."""
    chunks: list[bytes] = []
    size = 0
    try:
        limits.check_declared(response)
        for chunk in response.iter_bytes():
            size += len(chunk)
            limits.check(size)
            chunks.append(chunk)
    except AnswerLimitExceeded:
        response.close()
        raise
    _keep_content(response, chunks)


async def aread_within(response: httpx.Response, limits: AnswerLimits) -> None:
    """:func:`read_within` for an async response."""
    chunks: list[bytes] = []
    size = 0
    try:
        limits.check_declared(response)
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            limits.check(size)
            chunks.append(chunk)
    except AnswerLimitExceeded:
        await response.aclose()
        raise
    _keep_content(response, chunks)


def _keep_content(response: httpx.Response, chunks: list[bytes]) -> None:
    # httpx has no public way to hand a response the body read from its stream: read() would
    # decode it again with no limit. This is the attribute read() fills and .content returns.
    response._content = b"".join(chunks)
