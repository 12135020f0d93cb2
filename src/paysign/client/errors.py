"""What the client raises, so an agent can tell "ask the human" from "retry" from "give up".

Every exception is a :class:`PaysignClientError` with two flags:

- ``needs_human``: only the account holder can change the outcome (approve a seller, raise a
  cap, issue a key); retrying will not help.
- ``retryable``: the same call may succeed later without any change.

The service's refusals are :class:`PaysignProblem` subclasses chosen by the slug of the problem
``type`` and carry the problem document (RFC 9457) as ``problem``:

    >>> error = problem_error(403, {"type": "http://127.0.0.1:8402/problems/allow-pending",
    ...                             "title": "Seller approval pending", "status": 403,
    ...                             "detail": "The seller a.example is waiting"})
    >>> type(error).__name__, error.slug, error.needs_human, error.retryable
    ('AllowPending', 'allow-pending', True, False)
    >>> str(error)
    'Seller approval pending: The seller a.example is waiting'
"""

from __future__ import annotations

from typing import Any, ClassVar

from paysign.client.payment import Payment
from paysign.protocol.payment_required import Settlement
from paysign.protocol.usdc import format_usdc


class PaysignClientError(Exception):
    """Base of everything :mod:`paysign.client` raises."""

    needs_human: ClassVar[bool] = False
    retryable: ClassVar[bool] = False

    @property
    def title(self) -> str:
        return type(self).__name__


# ---- the service's answers --------------------------------------------------------------------


class PaysignProblem(PaysignClientError):
    """The paysign service refused the request; ``problem`` is its problem document."""

    slug: ClassVar[str] = ""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        detail = problem.get("detail") or problem.get("message") or ""
        super().__init__(f"{self.title}: {detail}" if detail else self.title)

    @property
    def title(self) -> str:
        title = self.problem.get("title") or self.problem.get("message")
        return str(title) if title else f"HTTP {self.status}"

    @property
    def detail(self) -> str:
        return str(self.problem.get("detail") or "")

    @property
    def type(self) -> str:
        return str(self.problem.get("type") or "")


class Unauthorized(PaysignProblem):
    """401: the API key is missing, invalid, expired or revoked (the service will not say which).
    A new key comes from the account holder, in the portal."""

    slug = "unauthorized"
    needs_human = True


class PaymentRefused(PaysignProblem):
    """The account's source policy or a spend cap refused the payment; nothing was signed."""

    needs_human = True


class AllowPending(PaymentRefused):
    """The seller waits for the account holder's approval (it is now on their pending list)."""

    slug = "allow-pending"


class PendingApprovalsFull(PaymentRefused):
    """A new seller needs approval and the account holder's approvals queue is full (it was not
    added). Trying other new sellers will be refused the same way until the holder decides."""

    slug = "pending-approvals-full"


class SellerDenied(PaymentRefused):
    slug = "seller-denied"


class EcosystemDisabled(PaymentRefused):
    slug = "ecosystem-disabled"


class SpendCapExceeded(PaymentRefused):
    """A spend cap would be passed; ``cap``, ``limit``, ``remaining``, ``amount`` (base units) and
    ``resets_at`` (ISO time, or ``None`` for the per-payment cap) say which and until when."""

    slug = "spend-cap-exceeded"

    @property
    def cap(self) -> str | None:
        return self.problem.get("cap")

    @property
    def limit(self) -> int | None:
        return self.problem.get("limit")

    @property
    def remaining(self) -> int | None:
        return self.problem.get("remaining")

    @property
    def amount(self) -> int | None:
        return self.problem.get("amount")

    @property
    def resets_at(self) -> str | None:
        return self.problem.get("resetsAt")


class MalformedRequest(PaysignProblem):
    """400: the signing request was not the document the service expects (a client bug)."""

    slug = "malformed-request"


class InvalidPaymentTerms(PaysignProblem):
    """422: the seller's terms cannot be signed as they are (``pointer`` names the field)."""

    slug = "invalid-payment-terms"

    @property
    def pointer(self) -> str | None:
        return self.problem.get("pointer")


class UnsupportedPaymentTerms(InvalidPaymentTerms):
    slug = "unsupported-payment-terms"


class SandboxNetworkMismatch(PaysignProblem):
    slug = "sandbox-network-mismatch"


class SellerResourceMismatch(PaysignProblem):
    """422: the terms' ``resource`` names another host than the seller being paid: they were
    not made by this seller for this URL (``seller_host`` and ``resource_host`` say which)."""

    slug = "seller-resource-mismatch"

    @property
    def seller_host(self) -> str | None:
        return self.problem.get("sellerHost")

    @property
    def resource_host(self) -> str | None:
        return self.problem.get("resourceHost")


class RequestTooLarge(PaysignProblem):
    slug = "request-too-large"


class TestFundsRateLimited(PaysignProblem):
    """429: test funds were granted in the last 24 hours; ``retry_after`` is in seconds."""

    __test__ = False  # not a pytest test class, whatever its name
    slug = "test-funds-rate-limited"
    retryable = True

    @property
    def retry_after(self) -> int | None:
        value = self.problem.get("retryAfterSeconds")
        return value if isinstance(value, int) else None


class ServiceError(PaysignProblem):
    """The service failed (5xx) or is temporarily unable; sending the request again may work."""

    retryable = True


_BY_SLUG: dict[str, type[PaysignProblem]] = {
    cls.slug: cls
    for cls in (
        Unauthorized,
        AllowPending,
        PendingApprovalsFull,
        SellerDenied,
        EcosystemDisabled,
        SpendCapExceeded,
        MalformedRequest,
        InvalidPaymentTerms,
        UnsupportedPaymentTerms,
        SandboxNetworkMismatch,
        SellerResourceMismatch,
        RequestTooLarge,
        TestFundsRateLimited,
    )
}
_RETRYABLE_SLUGS = frozenset({"sandbox-chain-unavailable", "test-funds-pending", "internal-error"})


def problem_error(status: int, problem: object) -> PaysignProblem:
    """The exception for a non-2xx answer of the service (``problem``: its decoded JSON body)."""
    document: dict[str, Any] = problem if isinstance(problem, dict) else {}
    if status == 401:
        return Unauthorized(status, document or {"message": "Unauthorized"})
    slug = str(document.get("type") or "").rstrip("/").rsplit("/", 1)[-1]
    cls = _BY_SLUG.get(slug)
    if cls is None:
        cls = ServiceError if status >= 500 or slug in _RETRYABLE_SLUGS else PaysignProblem
    return cls(status, document)


class SigningUnavailable(PaysignClientError):
    """The service could not be reached (or kept failing) after the client's retries."""

    retryable = True


# ---- the seller's side and the client's own checks --------------------------------------------


class PaymentError(PaysignClientError):
    """The payment could not be completed with the seller."""

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.context = context


class InvalidPaymentRequired(PaymentError):
    """The seller answered 402 without x402 terms the client can read."""


class NoAcceptableOption(PaymentError):
    """The seller offers no USDC option on the wanted network; nothing was signed."""

    @property
    def offered(self) -> list[Any]:
        offered: list[Any] = self.context.get("offered", [])
        return offered


class PriceExceedsLimit(PaymentError):
    """The seller's price is above the caller's ``max_amount``; nothing was signed."""

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


class SellerUnreachable(PaymentError):
    """No answer to the paid request before the signature expired (``valid_before``).

    The same signature was sent ``attempts`` times and never again after expiry; it settled at
    most once. Whether it did is on chain: the authorization ``nonce`` of ``payer``.
    """

    retryable = True

    def __init__(self, message: str, *, nonce: str, valid_before: int, attempts: int) -> None:
        super().__init__(message, nonce=nonce, valid_before=valid_before, attempts=attempts)
        self.nonce = nonce
        self.valid_before = valid_before
        self.attempts = attempts


# ---- the catalog ------------------------------------------------------------------------------


class ListingError(PaysignClientError):
    """A catalog call could not be built: unknown listing, missing or unknown input."""
