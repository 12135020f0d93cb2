"""Domain errors, each named for the condition it reports.

Every error carries a machine-readable ``slug`` (the problem type is ``{problem_base}/<slug>``),
a short ``title`` and a human ``detail``. Entry points map a slug to an HTTP status; nothing here
knows about HTTP. ``extensions`` holds extra problem members (RFC 9457) such as a JSON pointer.

    >>> err = InvalidPaymentTerms("/paymentRequired/accepts/0/scheme", "scheme must be 'exact'")
    >>> err.slug, err.extensions["pointer"]
    ('invalid-payment-terms', '/paymentRequired/accepts/0/scheme')
"""

from __future__ import annotations

from typing import Any, ClassVar


class PaysignError(Exception):
    slug: ClassVar[str] = "internal-error"
    title: ClassVar[str] = "Internal error"
    #: True when sending the same request again cannot succeed without a change elsewhere.
    permanent: ClassVar[bool] = True

    def __init__(self, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extensions: dict[str, Any] = extensions


class MalformedRequest(PaysignError):
    """The body is not the JSON document the operation expects."""

    slug = "malformed-request"
    title = "Malformed request"

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(f"{pointer or '/'}: {reason}", pointer=pointer)
        self.pointer = pointer
        self.reason = reason


class InvalidPaymentTerms(PaysignError):
    """The seller's terms are well-formed JSON but cannot be signed as they are."""

    slug = "invalid-payment-terms"
    title = "Payment terms cannot be signed"

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(f"{pointer}: {reason}", pointer=pointer)
        self.pointer = pointer
        self.reason = reason


class UnsupportedPaymentTerms(InvalidPaymentTerms):
    """Terms that are valid x402 but not something paysign signs (scheme, network, asset)."""

    slug = "unsupported-payment-terms"
    title = "Payment terms not supported"


class SellerResourceMismatch(InvalidPaymentTerms):
    """The terms pay for a resource on another host than the declared seller's: the policy,
    which judged the seller, would not have judged where the payment goes."""

    slug = "seller-resource-mismatch"
    title = "Payment terms are for another seller"

    def __init__(self, pointer: str, reason: str, seller_host: str, resource_host: str) -> None:
        super().__init__(pointer, reason)
        self.extensions.update(sellerHost=seller_host, resourceHost=resource_host)


class SandboxNetworkMismatch(PaysignError):
    slug = "sandbox-network-mismatch"
    title = "Sandbox mode needs a testnet payment"


class RequestTooLarge(PaysignError):
    slug = "request-too-large"
    title = "Request body too large"


class UnsupportedMediaType(PaysignError):
    slug = "unsupported-media-type"
    title = "Content-Type must be application/json"


class AccountNotFound(PaysignError):
    slug = "account-not-found"
    title = "No such account"


class AccountAlreadyExists(PaysignError):
    slug = "account-exists"
    title = "An account with this email exists"


class ActiveKeyExists(PaysignError):
    slug = "active-key-exists"
    title = "An API key is already active"


class NoActiveKey(PaysignError):
    slug = "no-active-key"
    title = "No active API key"


class InvalidKeyExpiry(PaysignError):
    slug = "invalid-key-expiry"
    title = "API key expiry out of range"


class InvalidAccountInput(PaysignError):
    slug = "invalid-account-input"
    title = "Invalid account details"


class BackupRefused(PaysignError):
    """A backup or restore the operator asked for cannot be done as asked (a destination that
    exists, a data directory not empty, a file that is not a paysign database)."""

    slug = "backup-refused"
    title = "Backup or restore refused"


class InvalidPolicy(PaysignError):
    slug = "invalid-policy"
    title = "Invalid source policy"

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(f"{pointer or '/'}: {reason}", pointer=pointer)


class PaymentRefused(PaysignError):
    """The source policy or a spend cap refused a payment; nothing was signed."""


class SellerDenied(PaymentRefused):
    slug = "seller-denied"
    title = "Seller is on the deny list"


class EcosystemDisabled(PaymentRefused):
    slug = "ecosystem-disabled"
    title = "Payments to this ecosystem are switched off"


class AllowPending(PaymentRefused):
    slug = "allow-pending"
    title = "Seller approval pending"


class PendingApprovalsFull(PaymentRefused):
    """A new seller needs approval, and the account's approvals queue is full."""

    slug = "pending-approvals-full"
    title = "Too many sellers waiting for approval"


class SpendCapExceeded(PaymentRefused):
    slug = "spend-cap-exceeded"
    title = "Spend cap exceeded"


class PriceAboveListing(PaymentRefused):
    slug = "price-above-listing"
    title = "Price above the seller's listing"


class PayeeMismatch(PaymentRefused):
    slug = "payee-mismatch"
    title = "Payee differs from the seller's listing"


class SpendingFrozen(PaymentRefused):
    slug = "spending-frozen"
    title = "Spending is frozen"


class PayeeDenied(PaymentRefused):
    slug = "payee-denied"
    title = "Payee is refused by the policy"


class NotAuthenticated(PaysignError):
    """Missing, malformed, unknown, expired or revoked credential — deliberately not which."""

    slug = "unauthorized"
    title = "Unauthorized"


class InvalidCatalog(PaysignError):
    slug = "invalid-catalog"
    title = "Invalid catalog"

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(f"{pointer or '/'}: {reason}", pointer=pointer)


class ListingNotFound(PaysignError):
    slug = "listing-not-found"
    title = "No such listing"


class SchemaFromNewerVersion(PaysignError):
    """The database was migrated by a newer paysign than the one running (a rolled-back
    upgrade): this version cannot know what the newer schema means."""

    slug = "schema-from-newer-version"
    title = "Database schema from a newer paysign"


class FaucetRateLimited(PaysignError):
    slug = "test-funds-rate-limited"
    title = "Test funds already granted"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail, retryAfterSeconds=retry_after)
        self.retry_after = retry_after


class SandboxChainUnavailable(PaysignError):
    slug = "sandbox-chain-unavailable"
    title = "The sandbox chain is unavailable"
    permanent = False


class FaucetTransferPending(PaysignError):
    slug = "test-funds-pending"
    title = "Test funds sent, not yet confirmed"
    permanent = False


class WithdrawalRefused(PaysignError):
    """A withdrawal that cannot be made as asked (an address or amount it refuses): nothing
    was sent and no authenticator code was spent."""

    slug = "withdrawal-refused"
    title = "Withdrawal refused"


class WithdrawalUnavailable(PaysignError):
    """The network cannot carry a withdrawal now (no relayer configured, the chain down or
    refusing the transfer): nothing was sent."""

    slug = "withdrawal-unavailable"
    title = "Withdrawals are unavailable"
    permanent = False


class WithdrawalPending(PaysignError):
    """The transfer was submitted but its outcome is not known yet."""

    slug = "withdrawal-pending"
    title = "Withdrawal sent, not yet confirmed"
    permanent = False
