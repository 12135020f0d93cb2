"""What the client raises when the seller's side of a payment goes wrong: terms it cannot
read or accept, a price above the caller's limit, a paid request the seller refused, an answer
larger or slower than the client reads, or no answer before the signature expired. None of
them is a refusal by paysign (those are :class:`~paysign.client.errors.PaysignProblem`); all
are :class:`PaymentError`.
"""

from __future__ import annotations

from typing import Any

from paysign.client.errors import PaysignClientError
from paysign.client.payment import Payment
from paysign.protocol.payment_required import Settlement
from paysign.protocol.usdc import format_usdc


class PaymentError(PaysignClientError):
    """The payment could not be completed with the seller."""

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.context = context


class InvalidPaymentRequired(PaymentError):
    """The seller answered 402 without x402 terms the client can read."""

    heading = "The seller's payment request cannot be read"
    advice = "Nothing was signed. Check the URL; the seller does not speak x402 as expected."


class NoAcceptableOption(PaymentError):
    """The seller offers no USDC option on the wanted network; nothing was signed."""

    heading = "The seller offers no payment paysign can make"
    advice = (
        "Nothing was signed. Pick a network the seller offers USDC on (--network), or its "
        "testnet with --sandbox."
    )

    @property
    def offered(self) -> list[Any]:
        offered: list[Any] = self.context.get("offered", [])
        return offered


class PriceExceedsLimit(PaymentError):
    """The seller's price is above the caller's ``max_amount``; nothing was signed."""

    heading = "The price is above your limit"
    advice = "Nothing was signed. Raise the limit (--max-usdc) if the price is right."

    def __init__(self, amount: int, max_amount: int, seller_url: str) -> None:
        super().__init__(
            f"the seller asks {format_usdc(amount)} USDC, more than the limit of "
            f"{format_usdc(max_amount)} USDC; nothing was signed",
            amount=amount,
            max_amount=max_amount,
            seller_url=seller_url,
        )
        self.amount = amount
        self.max_amount = max_amount


class PaymentRejected(PaymentError):
    """The seller answered the paid request with 402 again: it did not accept the payment.

    ``reason`` is the seller's error; ``settlement`` its receipt if it sent one. When the same
    signature had to be sent more than once (``payment.attempts > 1``), an earlier attempt may
    have settled without its answer arriving: look the nonce up before paying again.
    """

    heading = "The seller did not accept the payment"

    def __init__(
        self, reason: str, payment: Payment, settlement: Settlement | None, response: Any
    ) -> None:
        hint = (
            " (the signature was sent more than once: an earlier attempt may have settled)"
            if payment.attempts > 1
            else ""
        )
        super().__init__(f"the seller did not accept the payment: {reason}{hint}")
        self.reason = reason
        self.payment = payment
        self.settlement = settlement
        self.response = response

    @property
    def possibly_settled(self) -> bool:
        return self.payment.attempts > 1

    @property
    def remedy(self) -> str:
        if self.possibly_settled:
            return (
                f"Before paying again, look up the authorization nonce {self.payment.nonce} on "
                f"{self.payment.network}: an earlier attempt may have settled."
            )
        return "It did not settle. Do not send the same payment again; read the seller's reason."


class SellerUnreachable(PaymentError):
    """No answer to the paid request before the signature expired (``valid_before``).

    The same signature was sent ``attempts`` times and never again after expiry; it settled at
    most once. Whether it did is on chain: the authorization ``nonce`` of ``payer``.
    """

    retryable = True
    heading = "The seller did not answer the payment"

    @property
    def remedy(self) -> str:
        return (
            f"The signed payment settled at most once. Look up the authorization nonce "
            f"{self.nonce} on chain before paying again."
        )

    def __init__(self, message: str, *, nonce: str, valid_before: int, attempts: int) -> None:
        super().__init__(message, nonce=nonce, valid_before=valid_before, attempts=attempts)
        self.nonce = nonce
        self.valid_before = valid_before
        self.attempts = attempts


class AnswerLimitExceeded(PaymentError):
    """The client stopped reading a seller's answer. ``reason`` says why: ``"too-large"``
    (more than ``limit`` bytes) or ``"too-slow"`` (a 402's body not whole within the deadline).

    ``payment`` is ``None`` when it was the 402: nothing was signed. Otherwise it was the
    answer to the paid request, and the payment was sent: ``payment.transaction`` and
    ``payment.nonce`` say what to look up.
    """

    def __init__(
        self, reason: str, *, seller_url: str, limit: int, payment: Payment | None
    ) -> None:
        what = "its 402" if payment is None else "its answer to the paid request"
        if reason == "too-large":
            message = f"the seller at {seller_url} sent more than {limit} bytes in {what}"
        else:
            message = f"the seller at {seller_url} did not send {what} in time"
        super().__init__(message, reason=reason, seller_url=seller_url, limit=limit)
        self.reason = reason
        self.seller_url = seller_url
        self.limit = limit
        self.payment = payment

    @property
    def title(self) -> str:
        if self.payment is None:
            return "The seller's payment request could not be read"
        return "The seller's answer is larger than the client reads"

    @property
    def remedy(self) -> str:
        if self.payment is None:
            return (
                "Nothing was signed. A 402 carries only the payment terms; this seller sends "
                "far more, or keeps its answer coming: do not pay it."
            )
        settled = (
            f"transaction {self.payment.transaction}"
            if self.payment.transaction
            else f"the authorization nonce {self.payment.nonce} on {self.payment.network}"
        )
        return (
            f"The payment was sent: look up {settled}. If an answer this large is expected, "
            "raise the limit (max_answer_bytes, or --max-answer-mib) before paying for it again."
        )


# ---- the catalog ------------------------------------------------------------------------------
