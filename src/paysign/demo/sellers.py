"""The demo sellers: every listing of the demo catalog, paid with x402 through the SDK.

One ASGI app serves them all at ``settings.demo_sellers_url``, and the demo's discovery index
of its Open Ecosystem sellers at ``/discovery`` (:mod:`paysign.demo.bazaar`). It holds two
endpoints of every seller, built the same way with different terms (:mod:`paysign.demo.terms`),
and :class:`SandboxRouter` sends each request to one of them: ``X-Sandbox-Mode: true`` to the
sandbox endpoint, anything else to production. A listing with ``sandboxAvailable: false``
answers a sandbox request ``400 sandbox_unavailable`` before any payment is asked for.

- x402 v2 listings: a FastAPI app behind the SDK's own payment middleware
  (``x402.http.middleware.fastapi.payment_middleware`` over an ``x402ResourceServer`` with the
  SDK's ``ExactEvmServerScheme`` and ``HTTPFacilitatorClient``). It answers 402 with the
  ``PAYMENT-REQUIRED`` header, reads ``PAYMENT-SIGNATURE``, verifies, runs the handler, settles
  only a successful answer, and adds ``PAYMENT-RESPONSE``.
- ``random_fact``, the x402 v1 seller: :class:`V1Seller`, by hand, because the SDK's middleware
  speaks v2 only (it reads no ``X-PAYMENT`` and writes no v1 body). It uses the SDK's v1 models
  (``PaymentRequirementsV1``, ``PaymentRequiredV1``, ``PaymentPayloadV1``), its header codecs
  and the same ``HTTPFacilitatorClient``: 402 with a JSON ``PaymentRequiredV1`` body, payment
  in ``X-PAYMENT``, receipt in ``X-PAYMENT-RESPONSE``, as legacy v1 sellers do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from x402 import x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient, PaymentOption, RouteConfig
from x402.http.middleware.fastapi import payment_middleware
from x402.http.utils import decode_payment_signature_header, encode_payment_response_header
from x402.mechanisms.evm.exact import ExactEvmServerScheme
from x402.schemas import AssetAmount, SettleResponse
from x402.schemas.v1 import PaymentPayloadV1, PaymentRequiredV1, PaymentRequirementsV1

from paysign.demo.bazaar import bazaar_app
from paysign.demo.data import BadInput, answer
from paysign.demo.terms import SANDBOX_HEADER, DemoListing, Mode, Terms, sandbox_requested

log = structlog.get_logger("paysign.demo.sellers")

Endpoint = Callable[[Request], Awaitable[Response]]

X_PAYMENT = "X-PAYMENT"
X_PAYMENT_RESPONSE = "X-PAYMENT-RESPONSE"


class SandboxRouter:
    """ASGI: ``X-Sandbox-Mode: true`` goes to ``sandbox``, every other request to
    ``production``."""

    def __init__(self, sandbox: ASGIApp, production: ASGIApp) -> None:
        self.sandbox = sandbox
        self.production = production

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = self.production
        if scope["type"] == "http":
            name = SANDBOX_HEADER.encode()
            value = next((v for k, v in scope["headers"] if k.lower() == name), None)
            if sandbox_requested(value.decode("latin-1") if value is not None else None):
                target = self.sandbox
        await target(scope, receive, send)


def _error(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


async def _inputs(request: Request, listing: DemoListing) -> tuple[dict[str, str], Any]:
    body: Any = None
    if listing.method == "POST":
        try:
            body = await request.json()
        except ValueError:
            raise BadInput("the body must be JSON") from None
    return dict(request.path_params), body


def _handler(listing: DemoListing, terms: Terms) -> Endpoint:
    """The seller's own work, run once the middleware has verified the payment. A 4xx answer
    is not settled (the SDK middleware settles only answers below 400)."""
    sandbox = terms.mode == "sandbox"

    async def endpoint(request: Request) -> Response:
        try:
            path, body = await _inputs(request, listing)
            data = answer(listing.name, path, dict(request.query_params), body, sandbox=sandbox)
        except BadInput as exc:
            return _error(400, "bad_input", str(exc))
        return JSONResponse(data)

    return endpoint


def _no_sandbox(listing: DemoListing) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        return _error(
            400,
            "sandbox_unavailable",
            f"{listing.name} has no sandbox endpoint (sandboxAvailable: false): call it without "
            "X-Sandbox-Mode to reach the production endpoint",
        )

    return endpoint


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


class V1Seller:
    """An x402 v1 seller written on the SDK's v1 models and its facilitator client."""

    def __init__(
        self, listing: DemoListing, terms: Terms, facilitator: HTTPFacilitatorClient
    ) -> None:
        self.listing = listing
        self.terms = terms
        self.facilitator = facilitator
        self.work = _handler(listing, terms)

    def requirements(self, request: Request) -> PaymentRequirementsV1:
        terms = self.terms
        return PaymentRequirementsV1(
            scheme="exact",
            network=terms.v1_network,
            max_amount_required=str(self.listing.price),
            resource=str(request.url),
            description=self.listing.description,
            mime_type="application/json",
            pay_to=terms.pay_to,
            max_timeout_seconds=terms.max_timeout_seconds,
            asset=terms.asset,
            extra=terms.extra,
        )

    @staticmethod
    def payment_required(
        requirements: PaymentRequirementsV1, error: str, headers: dict[str, str] | None = None
    ) -> JSONResponse:
        body = PaymentRequiredV1(error=error, accepts=[requirements])
        return JSONResponse(_dump(body), status_code=402, headers=headers)

    async def handle(self, request: Request) -> Response:
        requirements = self.requirements(request)
        header = request.headers.get(X_PAYMENT)
        if not header:
            return self.payment_required(requirements, f"{X_PAYMENT} header is required")
        try:
            payload = decode_payment_signature_header(header)
        except Exception:  # the SDK raises several kinds for a malformed header
            return self.payment_required(requirements, f"the {X_PAYMENT} header is malformed")
        if not isinstance(payload, PaymentPayloadV1):
            return self.payment_required(
                requirements, f"{X_PAYMENT} must carry an x402 v1 payment payload"
            )
        if (payload.scheme, payload.network) != (requirements.scheme, requirements.network):
            return self.payment_required(requirements, "No matching payment requirements")
        try:
            verified = await self.facilitator.verify(payload, requirements)
        except Exception as exc:
            log.warning("v1_verify_failed", error=str(exc))
            return self.payment_required(requirements, "the facilitator could not verify")
        if not verified.is_valid:
            return self.payment_required(requirements, verified.invalid_reason or "invalid")

        response = await self.work(request)
        if response.status_code >= 400:
            return response  # not settled: the buyer keeps the money for a failed call
        try:
            settled = await self.facilitator.settle(payload, requirements)
        except Exception as exc:
            log.warning("v1_settle_failed", error=str(exc))
            settled = SettleResponse(
                success=False,
                error_reason="unexpected_settle_error",
                transaction="",
                network=requirements.network,
            )
        receipt = {X_PAYMENT_RESPONSE: encode_payment_response_header(settled)}
        if not settled.success:
            return self.payment_required(
                requirements, settled.error_reason or "settlement failed", receipt
            )
        response.headers.update(receipt)
        return response


class DemoSellers:
    """The sellers of ``listings``, paid on ``terms``, checked by the facilitator at
    ``facilitator_url``. ``app()`` contacts the facilitator (``/supported``), so start it
    first."""

    def __init__(
        self, listings: list[DemoListing], terms: dict[Mode, Terms], facilitator_url: str
    ) -> None:
        self.listings = listings
        self.terms = terms
        self.facilitator = HTTPFacilitatorClient(FacilitatorConfig(url=facilitator_url))
        self.server = x402ResourceServer(self.facilitator)
        for item in terms.values():
            # The SDK's scheme class has untyped methods and a looser payment_flows type than
            # the protocol it implements; it is the SDK's own pairing.
            scheme = ExactEvmServerScheme()  # type: ignore[no-untyped-call]
            self.server.register(item.network, scheme)  # type: ignore[arg-type]

    def app(self) -> SandboxRouter:
        return SandboxRouter(self.endpoint("sandbox"), self.endpoint("production"))

    def route_config(self, listing: DemoListing, terms: Terms) -> RouteConfig:
        price = AssetAmount(amount=str(listing.price), asset=terms.asset, extra=terms.extra)
        return RouteConfig(
            accepts=PaymentOption(
                scheme="exact",
                pay_to=terms.pay_to,
                price=price,
                network=terms.network,
                max_timeout_seconds=terms.max_timeout_seconds,
            ),
            description=listing.description,
            mime_type="application/json",
        )

    def endpoint(self, mode: Mode) -> FastAPI:
        """Every seller's ``mode`` endpoint: one FastAPI app, the SDK middleware in front."""
        terms = self.terms[mode]
        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
        routes: dict[str, RouteConfig] = {}
        for listing in self.listings:
            path, methods = listing.route_path, [listing.method]
            if mode == "sandbox" and not listing.sandbox_available:
                app.add_route(path, _no_sandbox(listing), methods=methods)
            elif listing.x402_version == 1:
                seller = V1Seller(listing, terms, self.facilitator)
                app.add_route(path, seller.handle, methods=methods)
            else:
                routes[listing.x402_route] = self.route_config(listing, terms)
                app.add_route(path, _handler(listing, terms), methods=methods)
        app.add_route("/", self._index(terms), methods=["GET"])
        app.mount("/discovery", bazaar_app(self.listings, self.terms))  # the offline Bazaar
        # Built now, not on the first request: it fetches /supported and checks every route
        # against it, so a facilitator that cannot serve a network fails the start.
        app.middleware("http")(payment_middleware(routes, self.server))
        return app

    def _index(self, terms: Terms) -> Endpoint:
        async def index(request: Request) -> Response:
            base = str(request.base_url).rstrip("/")
            return JSONResponse(
                {
                    "endpoint": terms.mode,
                    "network": terms.network,
                    "payTo": terms.pay_to,
                    "sellers": [
                        {
                            "name": listing.name,
                            "method": listing.method,
                            "url": base + listing.route_path,
                            "priceBaseUnits": listing.price,
                            "x402Version": listing.x402_version,
                            "sandboxAvailable": listing.sandbox_available,
                        }
                        for listing in self.listings
                    ],
                }
            )

        return index
