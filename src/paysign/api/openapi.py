"""The OpenAPI 3.1 description of the public API, served at ``/openapi.json``.

It is built from the running configuration (addresses, the USDC contracts) and from the
problem registry (``http.problems``): each operation lists the problem types its errors map
to, found by walking the error classes it raises (``errors``), so a new refusal added under
one of them is documented without touching this module.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from paysign import errors
from paysign.api.openapi_components import components
from paysign.config import Settings
from paysign.http.problems import PROBLEM_TYPES
from paysign.protocol.networks import AssetRegistry
from paysign.services.budget import STATUS_DOCUMENT_SCHEMA

Schema = dict[str, Any]

#: What ``POST /wallets/signatures`` may refuse with, by error class; subclasses count too.
SIGNING_ERRORS: tuple[type[errors.PaysignError], ...] = (
    errors.MalformedRequest,
    errors.RequestTooLarge,
    errors.UnsupportedMediaType,
    errors.InvalidPaymentTerms,
    errors.SandboxNetworkMismatch,
    errors.PaymentRefused,
)
TEST_FUNDS_ERRORS: tuple[type[errors.PaysignError], ...] = (
    errors.FaucetRateLimited,
    errors.SandboxChainUnavailable,
    errors.FaucetTransferPending,
)
#: Any request can fail inside paysign; the request-log middleware answers this problem then.
INTERNAL_ERROR = "internal-error"
#: What an operation that reads or writes the database answers while the database is away.
DATABASE_UNAVAILABLE = "service-unavailable"
#: Problem types whose answers carry ``Retry-After``.
_RETRY_AFTER_SLUGS = frozenset({"test-funds-rate-limited", DATABASE_UNAVAILABLE})

_REF = "#/components/"
_JSON = "application/json"
_STRING = {"type": "string"}
_PROBLEM_JSON = "application/problem+json"


def problem_slugs(*raised: type[errors.PaysignError]) -> list[str]:
    """The registered problem types of these error classes and all their subclasses."""
    slugs: list[str] = []
    pending = list(raised)
    while pending:
        kind = pending.pop(0)
        pending.extend(kind.__subclasses__())
        if kind.slug in PROBLEM_TYPES and kind.slug not in (*slugs, INTERNAL_ERROR):
            slugs.append(kind.slug)
    return slugs


def _header(name: str) -> Schema:
    return {"$ref": f"{_REF}headers/{name}"}


def _response(
    description: str,
    media_type: str | None = None,
    schema: Schema | None = None,
    headers: dict[str, Schema] | None = None,
) -> Schema:
    response: Schema = {
        "description": description,
        "headers": {"X-Request-Id": _header("X-Request-Id"), **(headers or {})},
    }
    if media_type is not None:
        response["content"] = {media_type: {"schema": schema or {}}}
    return response


def _problems(problem_base: str, slugs: list[str]) -> dict[str, Schema]:
    """One response per status, its body one of that status's problem types exactly."""
    by_status: dict[int, list[str]] = {}
    for slug in [*slugs, INTERNAL_ERROR]:
        by_status.setdefault(PROBLEM_TYPES[slug].status, []).append(slug)
    responses = {}
    for status, group in sorted(by_status.items()):
        kinds = [PROBLEM_TYPES[slug] for slug in group]
        variants = [
            {
                "properties": {
                    "type": {"const": f"{problem_base}/{kind.slug}"},
                    "title": {"const": kind.title},
                    "status": {"const": kind.status},
                }
            }
            for kind in kinds
        ]
        headers = {}
        if all(kind.slug in _RETRY_AFTER_SLUGS for kind in kinds):
            headers["Retry-After"] = _header("Retry-After")
        responses[str(status)] = _response(
            "; ".join(f"{kind.title} ({problem_base}/{kind.slug})" for kind in kinds),
            _PROBLEM_JSON,
            {"allOf": [{"$ref": f"{_REF}schemas/Problem"}, {"oneOf": variants}]},
            headers,
        )
    return responses


def _unauthorized() -> Schema:
    return _response(
        "Missing, invalid, expired or revoked API key (which of them is not said)",
        _JSON,
        {"$ref": f"{_REF}schemas/Unauthorized"},
        {"WWW-Authenticate": _header("WWW-Authenticate")},
    )


def _catalog_operation(summary: str, operation_id: str, schema: str, problem_base: str) -> Schema:
    cache_headers = {name: _header(name) for name in ("ETag", "Cache-Control", "Vary")}
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "tags": ["catalog"],
            "description": "No key is needed; a key that is sent must be valid.",
            "security": [{}, {"apiKey": []}],
            "parameters": [
                {
                    "name": "If-None-Match",
                    "in": "header",
                    "required": False,
                    "description": "ETags of a copy the client holds, or `*`",
                    "schema": {"type": "string"},
                }
            ],
            "responses": {
                "200": _response(
                    "The catalog document",
                    _JSON,
                    {"$ref": f"{_REF}schemas/{schema}"},
                    cache_headers,
                ),
                "304": _response("Not modified since the ETag sent", headers=cache_headers),
                "401": _unauthorized(),
                **_problems(problem_base, [DATABASE_UNAVAILABLE]),
            },
        }
    }


def _signing_operation(problem_base: str) -> Schema:
    return {
        "post": {
            "operationId": "signPayment",
            "summary": "Sign an x402 payment from the caller's wallet",
            "tags": ["wallet"],
            "security": [{"apiKey": []}],
            "parameters": [
                {
                    "name": "X-Sandbox-Mode",
                    "in": "header",
                    "required": False,
                    "description": "`true` for a sandbox (testnet) payment, which skips the spend "
                    "caps; omit it (or send `false`) for a live payment. Any letter case. With "
                    "mainnet terms `true` is refused (422 `sandbox-network-mismatch`).",
                    "schema": {
                        "type": "string",
                        "pattern": "^(?:[tT][rR][uU][eE]|[fF][aA][lL][sS][eE])$",
                    },
                }
            ],
            "requestBody": {
                "required": True,
                "content": {_JSON: {"schema": {"$ref": f"{_REF}schemas/SignatureRequest"}}},
            },
            "responses": {
                "200": _response(
                    "Signed; the signature is recorded before it is returned",
                    _JSON,
                    {"$ref": f"{_REF}schemas/SignatureResult"},
                ),
                "401": _unauthorized(),
                **_problems(problem_base, [*problem_slugs(*SIGNING_ERRORS), DATABASE_UNAVAILABLE]),
            },
        }
    }


def _test_funds_operation(problem_base: str) -> Schema:
    return {
        "post": {
            "operationId": "requestTestFunds",
            "summary": "Send test USDC on the sandbox network to the caller's wallet",
            "description": "Once per account per rolling 24 hours; takes no body.",
            "tags": ["wallet"],
            "security": [{"apiKey": []}],
            "responses": {
                "200": _response(
                    "Transferred and mined", _JSON, {"$ref": f"{_REF}schemas/TestFundsResult"}
                ),
                "401": _unauthorized(),
                **_problems(
                    problem_base, [*problem_slugs(*TEST_FUNDS_ERRORS), DATABASE_UNAVAILABLE]
                ),
            },
        }
    }


def _wallet_status_operation(problem_base: str) -> Schema:
    seller = "A seller's URL or host/path: also say whether it waits for approval."
    return {
        "get": {
            "operationId": "getWalletStatus",
            "summary": "What the caller's wallet can still spend: each cap's room and reset, "
            "pending approvals, the sandbox balance, the API key's expiry",
            "tags": ["wallet"],
            "security": [{"apiKey": []}],
            "parameters": [
                {"name": "seller", "in": "query", "description": seller, "schema": _STRING}
            ],
            "responses": {
                "200": _response("The wallet's status", _JSON, STATUS_DOCUMENT_SCHEMA),
                "401": _unauthorized(),
                **_problems(problem_base, ["malformed-request", DATABASE_UNAVAILABLE]),
            },
        }
    }


def _status_operation(problem_base: str, summary: str, operation_id: str, *statuses: int) -> Schema:
    status_schema = {"$ref": f"{_REF}schemas/Status"}
    responses = {
        str(status): _response(
            "ok" if status == 200 else "unavailable",
            _JSON,
            status_schema,
            {} if status == 200 else {"Retry-After": _header("Retry-After")},
        )
        for status in statuses
    }
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "tags": ["operations"],
            "responses": {**responses, **_problems(problem_base, [])},
        }
    }


def _metrics_operation(problem_base: str) -> Schema:
    exposition = _response("Prometheus text format", "text/plain", {"type": "string"})
    return {
        "get": {
            "operationId": "getMetrics",
            "summary": "Prometheus metrics: for a client on the server's own machine, or for "
            "anyone with the metrics token (Authorization: Bearer) when one is configured",
            "tags": ["operations"],
            "responses": {
                "200": exposition,
                **_problems(problem_base, ["metrics-token-required", "not-found"]),
            },
        }
    }


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def openapi_document(settings: Settings, registry: AssetRegistry) -> dict[str, Any]:
    base_url = settings.resolved_base_url
    problem_base = settings.resolved_problem_base
    catalog_url = settings.resolved_catalog_url
    catalog_file = settings.resolved_catalog_file_url
    catalog = _catalog_operation(
        "The catalog: Premium and Standard listings", "getCatalog", "Catalog", problem_base
    )
    if catalog_url != base_url:
        catalog = {"servers": [{"url": catalog_url}], **catalog}
    full = _catalog_operation(
        "The full catalog file: every tier, Open Ecosystem too",
        "getFullCatalog",
        "FullCatalog",
        problem_base,
    )
    if _origin(catalog_file) != _origin(base_url):
        full = {"servers": [{"url": _origin(catalog_file)}], **full}
    problem_page = {
        "get": {
            "operationId": "getProblemType",
            "summary": "What a problem type means and what to do about it",
            "tags": ["operations"],
            "parameters": [
                {
                    "name": "slug",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "enum": sorted(PROBLEM_TYPES)},
                }
            ],
            "responses": {
                "200": _response("The page", "text/html", {"type": "string"}),
                **_problems(problem_base, ["not-found"]),
            },
        }
    }
    openapi_json = {
        "get": {
            "operationId": "getOpenApi",
            "summary": "This document",
            "tags": ["operations"],
            "responses": {
                "200": _response("OpenAPI 3.1", _JSON, {"type": "object"}),
                **_problems(problem_base, []),
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "paysign",
            "version": "1",
            "description": "Custodial x402 payment signing (USDC on Base) for AI agents. "
            f"Every error but 401 is an RFC 9457 problem whose `type` ({problem_base}/<slug>) "
            "is a page saying what happened and what to do; an unknown path answers 404 "
            "`not-found` and a method an address does not take 405 `method-not-allowed`. "
            "Not described here: the web portal (account, API key, source policy, approvals) "
            f"at {_origin(base_url)}/portal, the OAuth authorization server at "
            f"{settings.resolved_auth_url}, and the MCP connector at {settings.resolved_mcp_url} "
            "with its RFC 9728 metadata under /.well-known/oauth-protected-resource.",
        },
        "servers": [{"url": base_url}],
        "components": components(registry),
        "paths": {
            "/wallets/signatures": _signing_operation(problem_base),
            "/wallets/testnet/funds": _test_funds_operation(problem_base),
            "/wallets/status": _wallet_status_operation(problem_base),
            "/catalog": catalog,
            "/buyers/catalog": _catalog_operation(
                "The catalog (the same document as /catalog)",
                "getBuyersCatalog",
                "Catalog",
                problem_base,
            ),
            urlsplit(catalog_file).path: full,
            "/problems/{slug}": problem_page,
            "/healthz": _status_operation(problem_base, "Liveness", "getHealth", 200),
            "/readyz": _status_operation(
                problem_base, "Readiness: the database answers", "getReady", 200, 503
            ),
            "/metrics": _metrics_operation(problem_base),
            "/openapi.json": openapi_json,
        },
    }
