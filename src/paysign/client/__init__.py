"""The buyer side of paysign: pay x402 sellers with an API key, no private key in the agent.

Usable without the server: it needs ``httpx`` and :mod:`paysign.protocol` only (never the
store, the services, the API, starlette or sqlalchemy). See ``docs/client.md``.

    from paysign.client import PaysignClient, payment_of

    with PaysignClient(sandbox=True) as http:  # PAYSIGN_API_KEY, PAYSIGN_BASE_URL
        response = http.get("http://127.0.0.1:8403/weather/v1/forecast/Paris")
        print(response.json(), payment_of(response).transaction)
"""

from paysign.client.auth import PaysignAuth, payment_of
from paysign.client.catalog import (
    CallResult,
    Listing,
    acall_listing,
    build_listing_request,
    call_listing,
    filter_listings,
    find_listing,
    listings_of,
)
from paysign.client.clients import AsyncPaysignClient, PaysignClient
from paysign.client.errors import (
    AllowPending,
    EcosystemDisabled,
    InvalidPaymentTerms,
    ListingBreached,
    ListingError,
    MalformedRequest,
    PayeeDenied,
    PayeeMismatch,
    PaymentRefused,
    PaysignClientError,
    PaysignProblem,
    PendingApprovalsFull,
    PriceAboveListing,
    RequestTooLarge,
    SandboxNetworkMismatch,
    SellerDenied,
    SellerResourceMismatch,
    ServiceError,
    SigningUnavailable,
    SpendCapExceeded,
    SpendingFrozen,
    TestFundsRateLimited,
    Unauthorized,
    UnsupportedPaymentTerms,
)
from paysign.client.payment import Payment
from paysign.client.payment_errors import (
    AnswerLimitExceeded,
    InvalidPaymentRequired,
    NoAcceptableOption,
    PaymentError,
    PaymentRejected,
    PriceExceedsLimit,
    SellerUnreachable,
)
from paysign.client.retry import AsyncPaidRetryTransport, PaidRetryTransport
from paysign.client.signer import DEFAULT_BASE_URL, PaysignSigner, Signature
from paysign.client.status import BudgetRoom, CapRoom, WalletStatus
from paysign.client.wire import (
    DEFAULT_USDC,
    DEFAULT_USDC_DOMAIN,
    PaymentRequired,
    Settlement,
    choose_option,
    decode_payment_required,
    decode_settlement,
    format_usdc,
    parse_usdc,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_USDC",
    "DEFAULT_USDC_DOMAIN",
    "AllowPending",
    "AnswerLimitExceeded",
    "AsyncPaidRetryTransport",
    "AsyncPaysignClient",
    "BudgetRoom",
    "CallResult",
    "CapRoom",
    "EcosystemDisabled",
    "InvalidPaymentRequired",
    "InvalidPaymentTerms",
    "Listing",
    "ListingBreached",
    "ListingError",
    "MalformedRequest",
    "NoAcceptableOption",
    "PaidRetryTransport",
    "PayeeDenied",
    "PayeeMismatch",
    "Payment",
    "PaymentError",
    "PaymentRefused",
    "PaymentRejected",
    "PaymentRequired",
    "PaysignAuth",
    "PaysignClient",
    "PaysignClientError",
    "PaysignProblem",
    "PaysignSigner",
    "PendingApprovalsFull",
    "PriceAboveListing",
    "PriceExceedsLimit",
    "RequestTooLarge",
    "SandboxNetworkMismatch",
    "SellerDenied",
    "SellerResourceMismatch",
    "SellerUnreachable",
    "ServiceError",
    "Settlement",
    "Signature",
    "SigningUnavailable",
    "SpendCapExceeded",
    "SpendingFrozen",
    "TestFundsRateLimited",
    "Unauthorized",
    "UnsupportedPaymentTerms",
    "WalletStatus",
    "acall_listing",
    "build_listing_request",
    "call_listing",
    "choose_option",
    "decode_payment_required",
    "decode_settlement",
    "filter_listings",
    "find_listing",
    "format_usdc",
    "listings_of",
    "parse_usdc",
    "payment_of",
]
