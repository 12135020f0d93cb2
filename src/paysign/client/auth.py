"""The whole x402 payment as an ``httpx`` auth flow (spec 4.1, "Completing a payment").

:class:`PaysignAuth` sends the request; on a ``402`` it decodes the terms (the v2
``PAYMENT-REQUIRED`` header, or the v1 body), chooses the USDC option on the wanted network and
puts it first, checks the price against ``max_amount``, has paysign sign it, and sends the
request again with ``PAYMENT-SIGNATURE`` (v2) or ``X-PAYMENT`` (v1). The seller's decoded
receipt is on the response: ``payment_of(response).settlement``.

Spec rule 6 — a paid request that gets no response is sent again *with the same signature*
until ``validBefore``, never signed again — is kept at two levels:

- :class:`~paysign.client.retry.PaidRetryTransport` (and its async twin) re-sends a paid
  request that failed in transit (connection refused or reset, timeout, truncated answer) with
  the same header, until the signature is about to expire; then
  :class:`~paysign.client.payment_errors.SellerUnreachable`. ``PaysignClient`` installs it.
- Without that transport, the auth keeps the unanswered signature: sending the same request
  again through the same :class:`PaysignAuth` before ``validBefore`` reuses it.

The USDC contract accepts a nonce once, so however often a signature is sent it pays at most
once.

    with PaysignClient(sandbox=True, max_amount=parse_usdc("0.05")) as http:
        response = http.get("http://127.0.0.1:8403/weather/v1/forecast/Paris")
        print(response.json(), payment_of(response).transaction)
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from paysign.client.answers import (
    DEFAULT_MAX_ANSWER_BYTES,
    AnswerLimits,
    aread_within,
    read_within,
)
from paysign.client.payment import Payment
from paysign.client.payment_errors import (
    InvalidPaymentRequired,
    PaymentRejected,
    PriceExceedsLimit,
)
from paysign.client.signer import PaysignSigner, Signature
from paysign.client.wire import (
    SANDBOX_HEADER,
    ChosenOption,
    Settlement,
    choose_option,
    decode_payment_required,
    decode_settlement,
    payment_header_name,
)
from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA, Network, resolve_network
from paysign.protocol.usdc import format_usdc

__all__ = ["Payment", "PaysignAuth", "payment_of"]

#: ``response.extensions`` key of the :class:`Payment`; ``request.extensions`` key of the
#: attempt a paid request belongs to.
PAYMENT_EXTENSION = "paysign.payment"
ATTEMPT_EXTENSION = "paysign.attempt"
#: Facilitators refuse a signature this close to its ``validBefore``: no retry after that.
EXPIRY_MARGIN_SECONDS = 6

EventHook = Callable[[str, str], None]


def payment_of(response: httpx.Response) -> Payment | None:
    """The :class:`Payment` behind ``response``; ``None`` when nothing was paid."""
    payment = response.extensions.get(PAYMENT_EXTENSION)
    return payment if isinstance(payment, Payment) else None


@dataclass(eq=False)
class PaidAttempt:
    """One signature and everything sent with it (mutable: counts its sends)."""

    chosen: ChosenOption
    signature: Signature
    seller_url: str
    x402_version: int
    sandbox: bool
    max_answer_bytes: int
    sends: int = 0

    @property
    def header_name(self) -> str:
        return payment_header_name(self.x402_version)

    def usable(self, now: float) -> bool:
        return now < self.signature.valid_before - EXPIRY_MARGIN_SECONDS

    def payment(self, settlement: Settlement | None) -> Payment:
        return Payment(
            seller_url=self.seller_url,
            x402_version=self.x402_version,
            network=self.chosen.network.caip2,
            amount=self.chosen.amount,
            asset=self.chosen.asset,
            pay_to=self.chosen.pay_to,
            sandbox=self.sandbox,
            nonce=self.signature.nonce,
            valid_before=self.signature.valid_before,
            attempts=max(self.sends, 1),
            settlement=settlement,
        )

    def answer_limits(self, response: httpx.Response) -> AnswerLimits:
        """How much of the paid request's answer is read. No overall deadline: a large paid
        file may take a while; the caller's timeout still bounds each read."""
        payment = self.payment(decode_settlement(response.headers))
        return AnswerLimits(self.max_answer_bytes, None, self.seller_url, payment)


@dataclass(frozen=True, slots=True)
class _Sign:
    seller_url: str
    payment_required: dict[str, Any]
    sandbox: bool


@dataclass(frozen=True, slots=True)
class _Send:
    request: httpx.Request


def _fingerprint(request: httpx.Request) -> tuple[str, str, str]:
    return (request.method, str(request.url), hashlib.sha256(request.content).hexdigest())


class PaysignAuth(httpx.Auth):
    """An ``httpx.Auth`` (sync and async) that pays a seller's ``402`` through paysign.

    - ``signer``: the :class:`PaysignSigner` (API key, service URL).
    - ``sandbox``: testnet payments without spend caps; ``X-Sandbox-Mode: true`` goes to the
      seller and to paysign.
    - ``network``: the network to pay on (CAIP-2 or alias); default Base mainnet, or Base
      Sepolia in sandbox mode. A testnet payment without ``sandbox`` is a live payment.
    - ``max_amount``: base units; a higher price raises
      :class:`~paysign.client.payment_errors.PriceExceedsLimit` before anything is signed.
    - ``usdc``: CAIP-2 network → USDC contract, if not Circle's.
    - ``max_answer_bytes``: the largest answer to a paid request the client reads (it holds
      it in memory); a larger one raises
      :class:`~paysign.client.payment_errors.AnswerLimitExceeded`. A 402's body is read up to
      1 MiB, whole within the read timeout.
    - ``on_event``: called with ``(kind, message)`` as the payment progresses (``signing``,
      ``paying``, ``paid``), e.g. to update a spinner.
    """

    def __init__(
        self,
        signer: PaysignSigner,
        *,
        sandbox: bool = False,
        network: str | None = None,
        max_amount: int | None = None,
        usdc: Mapping[str, str] | None = None,
        on_event: EventHook | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.signer = signer
        self.sandbox = sandbox
        self.network = self._network(network, sandbox)
        if max_amount is not None and max_amount < 0:
            raise ValueError("max_amount must not be negative")
        self.max_amount = max_amount
        if max_answer_bytes < 1:
            raise ValueError("max_answer_bytes must be at least 1")
        self.max_answer_bytes = max_answer_bytes
        self.usdc = usdc
        self.on_event = on_event
        self._unanswered: dict[tuple[str, str, str], PaidAttempt] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _network(name: str | None, sandbox: bool) -> Network:
        if name is None:
            return BASE_SEPOLIA if sandbox else BASE_MAINNET
        network = resolve_network(name)
        if network is None:
            raise ValueError(f"paysign pays on eip155:8453 or eip155:84532, not {name!r}")
        return network

    def _emit(self, kind: str, message: str) -> None:
        if self.on_event is not None:
            self.on_event(kind, message)

    # ---- signatures sent without an answer (rule 6, without the retry transport) ----

    def _remember(self, key: tuple[str, str, str], attempt: PaidAttempt) -> None:
        with self._lock:
            self._unanswered[key] = attempt

    def _take_unanswered(self, key: tuple[str, str, str]) -> PaidAttempt | None:
        now = time.time()
        with self._lock:
            for stale in [k for k, a in self._unanswered.items() if not a.usable(now)]:
                del self._unanswered[stale]
            return self._unanswered.pop(key, None)

    # ---- the procedure, free of I/O: yields _Send (gets a Response) and _Sign (a Signature) --

    def _procedure(self, request: httpx.Request) -> Generator[_Send | _Sign, Any, None]:
        if self.sandbox and SANDBOX_HEADER not in request.headers:
            request.headers[SANDBOX_HEADER] = "true"
        key = _fingerprint(request)
        attempt = self._take_unanswered(key)
        if attempt is None:
            response: httpx.Response = yield _Send(request)
            if response.status_code != 402:
                return
            attempt = yield from self._sign_for(response)
            target = response.request  # after any redirects: the request that got the 402
            target.read()
        else:
            self._emit("paying", "sending the unanswered payment again (same signature)")
            target = request

        paid = httpx.Request(
            target.method,
            target.url,
            headers=target.headers.copy(),
            content=target.content,
            extensions={**target.extensions, ATTEMPT_EXTENSION: attempt},
        )
        paid.headers[attempt.header_name] = attempt.signature.header
        self._emit("paying", f"paying {format_usdc(attempt.chosen.amount)} USDC, waiting")
        try:
            response = yield _Send(paid)
        except (GeneratorExit, httpx.TransportError):
            # Sent, and no (whole) answer came: the transport raised, the answer was cut off,
            # or the caller gave up. The same request through this auth reuses the signature
            # while it is valid.
            if attempt.usable(time.time()):
                self._remember(key, attempt)
            raise
        self._finish(response, attempt)

    def _sign_for(self, response: httpx.Response) -> Generator[_Sign, Any, PaidAttempt]:
        required = decode_payment_required(response.headers, response.content)
        seller_url = str(response.request.url)
        chosen = choose_option(required, self.network, usdc=self.usdc)
        if self.max_amount is not None and chosen.amount > self.max_amount:
            raise PriceExceedsLimit(chosen.amount, self.max_amount, seller_url)
        self._emit("signing", f"signing {format_usdc(chosen.amount)} USDC with paysign")
        signature: Signature = yield _Sign(seller_url, chosen.payment_required, self.sandbox)
        return PaidAttempt(
            chosen, signature, seller_url, required.version, self.sandbox, self.max_answer_bytes
        )

    def _finish(self, response: httpx.Response, attempt: PaidAttempt) -> None:
        settlement = decode_settlement(response.headers)
        payment = attempt.payment(settlement)
        response.extensions[PAYMENT_EXTENSION] = payment
        if response.status_code == 402:
            raise PaymentRejected(
                _rejection_reason(response, settlement), payment, settlement, response
            )
        if payment.transaction:
            self._emit("paid", f"paid {payment.usdc} USDC, transaction {payment.transaction}")
        else:
            self._emit("paid", f"paid {payment.usdc} USDC (HTTP {response.status_code})")

    # ---- httpx drivers ----

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        request.read()
        procedure = self._procedure(request)
        try:
            step = next(procedure)
            while True:
                if isinstance(step, _Sign):
                    result: Any = self.signer.sign(
                        step.seller_url, step.payment_required, sandbox=step.sandbox
                    )
                else:
                    result = yield step.request
                    if (limits := _answer_limits(step.request, result)) is not None:
                        try:
                            read_within(result, limits)
                        except httpx.TransportError as exc:
                            procedure.throw(exc)  # raises it again, after noting the attempt
                step = procedure.send(result)
        except StopIteration:
            return
        finally:
            procedure.close()

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        await request.aread()
        procedure = self._procedure(request)
        try:
            step = next(procedure)
            while True:
                if isinstance(step, _Sign):
                    result: Any = await self.signer.asign(
                        step.seller_url, step.payment_required, sandbox=step.sandbox
                    )
                else:
                    result = yield step.request
                    if (limits := _answer_limits(step.request, result)) is not None:
                        try:
                            await aread_within(result, limits)
                        except httpx.TransportError as exc:
                            procedure.throw(exc)  # raises it again, after noting the attempt
                step = procedure.send(result)
        except StopIteration:
            return
        finally:
            procedure.close()


def _answer_limits(request: httpx.Request, response: httpx.Response) -> AnswerLimits | None:
    """How the flow reads ``response``, or ``None`` when it leaves it to the caller. A 402 is
    read for its terms; a paid answer is read in the flow, so that one cut off mid-body counts
    as no answer (paid answers are therefore never streamed)."""
    attempt = request.extensions.get(ATTEMPT_EXTENSION)
    if isinstance(attempt, PaidAttempt):
        return attempt.answer_limits(response)
    if response.status_code == 402:
        return AnswerLimits.for_payment_required(response)
    return None


def _rejection_reason(response: httpx.Response, settlement: Settlement | None) -> str:
    if settlement is not None and settlement.error_reason:
        return settlement.error_reason
    try:
        error = decode_payment_required(response.headers, response.content).error
    except InvalidPaymentRequired:
        error = None
    return error or f"HTTP 402 {response.text[:200]}".strip()
