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


class PaysignClientError(Exception):
    """Base of everything :mod:`paysign.client` raises. ``title`` says what happened in words
    (the exception's message has the details) and ``remedy`` what to do about it."""

    needs_human: ClassVar[bool] = False
    retryable: ClassVar[bool] = False
    heading: ClassVar[str] = "The payment could not be completed"
    advice: ClassVar[str] = ""

    @property
    def title(self) -> str:
        return self.heading

    @property
    def remedy(self) -> str:
        return self.advice


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

    @property
    def remedy(self) -> str:
        """The problem type's page says what to do; it is the ``type`` URL."""
        return f"what to do: {self.type}" if self.type.startswith("http") else self.advice


class Unauthorized(PaysignProblem):
    """401: the API key is missing, invalid, expired or revoked (the service will not say which).
    A new key comes from the account holder, in the portal."""

    slug = "unauthorized"
    needs_human = True
    advice = (
        "Check the API key (--api-key or PAYSIGN_API_KEY): it may be mistyped, expired or "
        "revoked. The account holder issues a new one in the portal."
    )


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


class SpendingFrozen(PaymentRefused):
    """The account holder froze all spending, live and sandbox; only they can unfreeze it."""

    slug = "spending-frozen"


class PayeeDenied(PaymentRefused):
    """The account's payee rules refuse the address the terms pay (``pay_to``)."""

    slug = "payee-denied"

    @property
    def pay_to(self) -> str | None:
        return self.problem.get("payTo")


class ListingBreached(PaysignProblem):
    """A seller that is a catalog listing named other terms than its listing publishes: its
    endpoint may be spoofed or compromised, and nothing was signed. The account holder cannot
    lift this and the same call fails again: pay another seller."""

    advice = "Do not pay this seller another way: tell the account holder, choose another."


class PriceAboveListing(ListingBreached):
    """The terms ask more than the listing's published price (``listed_price``, base units)."""

    slug = "price-above-listing"

    @property
    def listed_price(self) -> int | None:
        return self.problem.get("listedPrice")


class PayeeMismatch(ListingBreached):
    """The terms pay another address than the listing's published one (``listedPayTo`` in
    ``problem``; ``None`` when the listing publishes none for the terms' network)."""

    slug = "payee-mismatch"


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
        SpendingFrozen,
        PayeeDenied,
        PriceAboveListing,
        PayeeMismatch,
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
    heading = "paysign could not be reached"
    advice = (
        "Nothing was signed. Check the service address (--base-url or PAYSIGN_BASE_URL) and "
        "that the service is running, then try again."
    )


# ---- the seller's side and the client's own checks --------------------------------------------


class ListingError(PaysignClientError):
    """A catalog call could not be built: unknown listing, missing or unknown input."""

    heading = "The listing cannot be called that way"
    advice = "Nothing was paid. `paysign catalog list` shows each listing's inputs."
