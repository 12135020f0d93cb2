"""Problem types (RFC 9457): the status each domain error maps to, and the page explaining it.

Every type URL ``{problem_base}/<slug>`` serves a page made from its entry here, so an agent
(or its human) can follow the link in an error to learn what happened and what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import structlog
from starlette.responses import Response

from paysign import errors
from paysign.policy.decide import MAX_PENDING_SELLERS
from paysign.services.availability import database_unavailable

log = structlog.get_logger("paysign.http")

#: The only detail a 500 ever carries: an internal error's own message can name contexts, key
#: ids or rows (a sealed secret's wallet, the master key it needs) that are no business of the
#: caller's, so it goes to the log instead.
INTERNAL_ERROR_DETAIL = "the request failed inside paysign; nothing was signed"

#: How long a client is asked to wait (``Retry-After``) when the database is unavailable.
UNAVAILABLE_RETRY_AFTER_SECONDS = 5
UNAVAILABLE_HEADERS = {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)}


@dataclass(frozen=True, slots=True)
class ProblemType:
    slug: str
    status: int
    title: str
    explanation: str
    remedy: str
    retryable: bool = False


PROBLEM_TYPES: dict[str, ProblemType] = {
    p.slug: p
    for p in [
        ProblemType(
            "malformed-request",
            400,
            errors.MalformedRequest.title,
            "The body is not the JSON document this operation expects: a field is missing or "
            "has the wrong JSON type. The `pointer` member names the field (RFC 6901).",
            "Fix the named field and send the request again. Sending it unchanged will fail.",
        ),
        ProblemType(
            "invalid-payment-terms",
            422,
            errors.InvalidPaymentTerms.title,
            "The seller's payment terms are well-formed JSON but cannot be signed as they are: "
            "an amount that is not a positive integer of base units, an address that is not "
            "20-byte hex, a timeout that is not a positive integer, or a token domain "
            "(extra.name / extra.version) that differs from the real USDC contract's.",
            "Check that the terms were copied unchanged from the seller's 402 response. If they "
            "were, the seller's terms are wrong and no signature would settle.",
        ),
        ProblemType(
            "unsupported-payment-terms",
            422,
            errors.UnsupportedPaymentTerms.title,
            "paysign signs the x402 `exact` scheme with USDC (EIP-3009) on Base "
            "(eip155:8453, alias `base`) and Base Sepolia (eip155:84532, alias "
            "`base-sepolia`). These terms ask for another scheme, network, asset or transfer "
            "method.",
            "Put a USDC option on Base first in `accepts`, if the seller offers one.",
        ),
        ProblemType(
            "seller-resource-mismatch",
            422,
            errors.SellerResourceMismatch.title,
            "The payment terms name the resource they pay for (`resource.url` in x402 v2, "
            "`accepts[0].resource` in v1), and its host is not the host of `sellerUrl`: the "
            "source policy judged one seller, the terms are for another. The `sellerHost` and "
            "`resourceHost` members name both (port included); `pointer` names the field. "
            "Nothing was signed or recorded.",
            "Send the URL you called as `sellerUrl` together with the terms that URL answered. "
            "If you did, the seller names another host as its resource; do not pay it.",
        ),
        ProblemType(
            "sandbox-network-mismatch",
            422,
            errors.SandboxNetworkMismatch.title,
            "`X-Sandbox-Mode: true` was sent with terms on Base mainnet. Sandbox payments skip "
            "spend caps, so they are only signed on the testnet.",
            "Choose the seller's testnet option, or omit the header to pay live.",
        ),
        ProblemType(
            "allow-pending",
            403,
            errors.AllowPending.title,
            "The account's source policy needs the account holder to approve this seller "
            "before any payment to it. The seller has been added to the holder's pending "
            "approvals; the detail names its host and path.",
            "Ask the human who owns the account to approve the seller in the paysign portal. "
            "Retrying before they do will not help.",
        ),
        ProblemType(
            "pending-approvals-full",
            403,
            errors.PendingApprovalsFull.title,
            "This seller needs the account holder's approval, but as many sellers as the "
            f"account keeps ({MAX_PENDING_SELLERS}, the `limit` member) are waiting for it "
            "already. A new seller is then refused without being added, so that an agent "
            "trying made-up sellers cannot bury the holder's real approvals. The detail names "
            "the seller. Sellers already waiting still answer `allow-pending`.",
            "Stop trying new sellers. Ask the human who owns the account to approve or deny "
            "the waiting sellers in the paysign portal (Approvals), or to add allow rules for "
            "the sellers they trust; retrying before they do will not help.",
        ),
        ProblemType(
            "seller-denied",
            403,
            errors.SellerDenied.title,
            "The seller matches a rule on the account's deny list (the `rule` member).",
            "Do not pay this seller. Only the account holder can change the deny list, in the "
            "portal; retrying will not help.",
        ),
        ProblemType(
            "ecosystem-disabled",
            403,
            errors.EcosystemDisabled.title,
            "The account holder has switched off payments to this tier of sellers (Premium, "
            "Standard or Open Ecosystem; the `tier` member says which).",
            "Choose a seller in an enabled tier, or ask the account holder to switch the "
            "ecosystem on in the portal. Retrying will not help.",
        ),
        ProblemType(
            "spend-cap-exceeded",
            403,
            errors.SpendCapExceeded.title,
            "Signing this payment would pass one of the account's spend caps. The members "
            "say which cap (`perPayment`, `hourly`, `daily` or `monthly`, or `seller.daily` or "
            "`seller.monthly` for the budget of the allow rule named in `rule`), its `limit` "
            "and what `remaining`, in USDC base units, and `resetsAt` (UTC) for the windowed "
            "caps. Sandbox payments (`X-Sandbox-Mode: true` on the testnet) do not count.",
            "Retrying will not help before `resetsAt`. A smaller payment may fit in what "
            "remains; a larger cap is the account holder's decision, in the portal.",
        ),
        ProblemType(
            "price-above-listing",
            403,
            errors.PriceAboveListing.title,
            "The seller is a catalog listing (the `listing` member), and its terms ask more "
            "than the listing's published price (`listedPrice`, `amount`: USDC base units). "
            "A listed seller is held to its listing: a seller endpoint that asks more may be "
            "compromised or spoofed.",
            "Do not pay these terms. Check the price in the catalog; if the seller really "
            "charges more now, it must update its listing. Retrying will not help.",
        ),
        ProblemType(
            "payee-mismatch",
            403,
            errors.PayeeMismatch.title,
            "The seller is a catalog listing (the `listing` member), and its terms pay "
            "another address (`payTo`) than the catalog's payment details publish for the "
            "terms' network (`listedPayTo`; null when the catalog is not paid on that "
            "network). A seller endpoint that names another payee may be compromised or "
            "spoofed.",
            "Do not pay these terms, and tell the account holder: the seller's endpoint is "
            "not answering as its listing says. Retrying will not help.",
        ),
        ProblemType(
            "payee-denied",
            403,
            errors.PayeeDenied.title,
            "The terms pay an address (`payTo`) the account's payee rules refuse: it is on "
            "the payee deny list, or the payee allow list is not empty and it is not on it "
            "(`rule` says which: `payTo.deny` or `payTo.allow`). Payee rules are checked "
            "before anything else, whatever the seller.",
            "Do not pay this address. Only the account holder can change the payee rules, in "
            "the portal; retrying will not help.",
        ),
        ProblemType(
            "spending-frozen",
            403,
            errors.SpendingFrozen.title,
            "The account holder has frozen spending: every payment, live and sandbox, is "
            "refused until they unfreeze it. The API key still works for the catalog.",
            "Do not retry. Only the account holder can unfreeze spending, in the portal "
            "(with a fresh authenticator code), or the operator with `paysign admin unfreeze`.",
        ),
        ProblemType(
            "test-funds-rate-limited",
            429,
            errors.FaucetRateLimited.title,
            "Test funds are granted once per account per rolling 24 hours. The `Retry-After` "
            "header (and `retryAfterSeconds`) says when the next grant is possible.",
            "Wait until then; the sandbox balance you were granted is still in the wallet.",
            retryable=True,
        ),
        ProblemType(
            "sandbox-chain-unavailable",
            503,
            errors.SandboxChainUnavailable.title,
            "The sandbox chain did not take the test-funds transfer. Nothing was sent and the "
            "24-hour window was not used.",
            "Try again in a little while.",
            retryable=True,
        ),
        ProblemType(
            "test-funds-pending",
            503,
            errors.FaucetTransferPending.title,
            "The test-funds transfer was sent but its receipt did not come back in time. It "
            "will most likely be mined; `transactionHash` names it. The 24-hour window counts "
            "from this request.",
            "Look the transaction up on the sandbox chain in a little while.",
            retryable=True,
        ),
        ProblemType(
            "request-too-large",
            413,
            errors.RequestTooLarge.title,
            "The request body is larger than this operation accepts.",
            "Send only the seller URL and the seller's payment terms.",
        ),
        ProblemType(
            "unsupported-media-type",
            415,
            errors.UnsupportedMediaType.title,
            "The body must be JSON, sent with `Content-Type: application/json`.",
            "Set the header and send the request again.",
        ),
        ProblemType(
            "not-found",
            404,
            "Not found",
            "There is nothing at this address.",
            "Check the path against the API description at /openapi.json.",
        ),
        ProblemType(
            "metrics-token-required",
            401,
            "Metrics token required",
            "This paysign requires a token to read its metrics (`PAYSIGN_METRICS_TOKEN`), and "
            "the request sent none or another one.",
            "Send the token configured on the server as `Authorization: Bearer <token>`.",
        ),
        ProblemType(
            "method-not-allowed",
            405,
            "Method not allowed",
            "This address does not accept that HTTP method.",
            "Check the method against the API description at /openapi.json.",
        ),
        ProblemType(
            "service-unavailable",
            503,
            "Service unavailable",
            "paysign's database cannot be reached or written just now (it is restarting, "
            "unreachable or out of disk space). The request was not carried out: nothing was "
            "signed, recorded or spent.",
            "Send the same request again after the number of seconds in the `Retry-After` "
            "header (also `retryAfterSeconds`). If it keeps failing, tell the operator.",
            retryable=True,
        ),
        ProblemType(
            "internal-error",
            500,
            "Internal error",
            "Something failed inside paysign. Nothing was signed and nothing changed.",
            "Send the request again; if it keeps failing, contact the operator with the "
            "request id from the `X-Request-Id` response header.",
            retryable=True,
        ),
    ]
}


def problem_response(
    problem_base: str,
    slug: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> Response:
    kind = PROBLEM_TYPES[slug]
    body: dict[str, Any] = {
        "type": f"{problem_base}/{slug}",
        "title": kind.title,
        "status": kind.status,
        "detail": detail,
        **extensions,
    }
    return Response(
        orjson.dumps(body),
        status_code=kind.status,
        media_type="application/problem+json",
        headers=headers,
    )


def internal_error_response(problem_base: str, exc: BaseException | None = None) -> Response:
    """The answer to an unexpected error: ``503`` with ``Retry-After`` when it is the database
    being unavailable for now, else ``500``. Neither says anything of the error, which goes to
    the log."""
    if exc is not None and database_unavailable(exc):
        status, body = unavailable_problem(problem_base)
        return Response(
            body,
            status_code=status,
            media_type="application/problem+json",
            headers=UNAVAILABLE_HEADERS,
        )
    return problem_response(problem_base, "internal-error", INTERNAL_ERROR_DETAIL)


def unavailable_problem(problem_base: str) -> tuple[int, bytes]:
    """The status and body of the answer to a request the database could not serve."""
    kind = PROBLEM_TYPES["service-unavailable"]
    body = {
        "type": f"{problem_base}/{kind.slug}",
        "title": kind.title,
        "status": kind.status,
        "detail": "the database is unavailable just now; the request was not carried out",
        "retryAfterSeconds": UNAVAILABLE_RETRY_AFTER_SECONDS,
    }
    return kind.status, orjson.dumps(body)


def problem_body(problem_base: str, error: errors.PaysignError) -> tuple[int, bytes]:
    """The status and ``application/problem+json`` body for a domain error."""
    kind = PROBLEM_TYPES.get(error.slug) or PROBLEM_TYPES["internal-error"]
    detail, extensions = error.detail, error.extensions
    if kind.slug == "internal-error":
        # Domain errors' messages name no secret (their classes promise it), so the log may
        # carry them; the caller gets nothing of them.
        log.error(
            "internal_error_answered",
            error_type=type(error).__name__,
            slug=error.slug,
            reason=detail,
        )
        detail, extensions = INTERNAL_ERROR_DETAIL, {}
    body = {
        "type": f"{problem_base}/{kind.slug}",
        "title": kind.title,
        "status": kind.status,
        "detail": detail,
        **extensions,
    }
    return kind.status, orjson.dumps(body)


def error_response(
    problem_base: str,
    error: errors.PaysignError,
    *,
    headers: dict[str, str] | None = None,
) -> Response:
    status, body = problem_body(problem_base, error)
    return Response(
        body, status_code=status, media_type="application/problem+json", headers=headers
    )
