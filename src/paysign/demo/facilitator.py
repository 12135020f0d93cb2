"""The local facilitator: the x402 SDK's own, over HTTP, settling on the sandbox chain.

``x402FacilitatorSync`` with the SDK's exact EVM schemes (v2 ``ExactEvmFacilitatorScheme`` and
v1 ``ExactEvmSchemeV1``) and its ``FacilitatorWeb3Signer`` on the sandbox chain's JSON-RPC
endpoint: it checks each payment (including an ``eth_call`` of ``transferWithAuthorization``)
and settles it by sending that transaction from the facilitator's key.

Base mainnet (``eip155:8453`` / ``base``) gets its own SDK facilitator with the same schemes
over a signer that has no chain (:class:`VerifyOnlySigner`): the SDK checks the signature, amount,
recipient and validity window, and ``/settle`` answers ``settlement_unavailable``. That is the
demo's "production": the sellers quote real mainnet terms, paysign signs them as live payments,
and nothing pretends mainnet USDC moved.

The HTTP surface is what the SDK's ``HTTPFacilitatorClient`` calls: ``GET /supported``, and
``POST /verify`` / ``POST /settle`` with ``{"x402Version", "paymentPayload",
"paymentRequirements"}``, each answering 200 with the SDK's ``VerifyResponse`` /
``SettleResponse`` (a malformed request gets 400).
"""

from __future__ import annotations

from typing import Any

import structlog
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from x402 import x402FacilitatorSync
from x402.mechanisms.evm import FacilitatorWeb3Signer
from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme
from x402.mechanisms.evm.exact.v1.facilitator import ExactEvmSchemeV1
from x402.mechanisms.evm.types import TransactionReceipt
from x402.schemas import SchemeNotFoundError, SettleResponse, SupportedResponse, VerifyResponse
from x402.schemas.helpers import parse_payment_payload, parse_payment_requirements

from paysign.demo.terms import Mode, Terms

log = structlog.get_logger("paysign.demo.facilitator")

SETTLEMENT_UNAVAILABLE = "settlement_unavailable"
#: A settlement receipt normally arrives in milliseconds on the dev chain.
CONFIRMATION_TIMEOUT_SECONDS = 30.0


class VerifyOnlySigner:
    """A ``FacilitatorEvmSigner`` without a chain, for networks the demo cannot settle on.

    The SDK's verify then checks everything it can without a node (payload shape, scheme,
    network, EIP-712 domain, recipient, exact amount, validity window, ECDSA recovery of the
    payer); the token contract is taken to exist and the ``eth_call`` simulation to pass.
    Anything that would send a transaction raises.
    """

    def __init__(self, address: str, asset: str) -> None:
        self._address = address
        self._asset = asset.lower()

    def get_addresses(self) -> list[str]:
        return [self._address]

    def get_code(self, address: str) -> bytes:
        return b"\x60\x00" if address.lower() == self._asset else b""

    def read_contract(self, address: str, abi: Any, function_name: str, *args: Any) -> Any:
        return None

    def verify_typed_data(self, *args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("no chain here: EIP-1271 signatures cannot be checked")

    def get_chain_id(self) -> int:
        raise RuntimeError("no chain here")

    def get_balance(self, address: str, token_address: str) -> int:
        raise RuntimeError("no chain here")

    def write_contract(self, *args: Any, **kwargs: Any) -> str:
        raise RuntimeError("no chain here: this network cannot be settled by the demo")

    def send_transaction(self, to: str, data: bytes) -> str:
        raise RuntimeError("no chain here: this network cannot be settled by the demo")

    def wait_for_transaction_receipt(self, tx_hash: str) -> TransactionReceipt:
        raise RuntimeError("no chain here")


class LocalFacilitator:
    """The SDK facilitator for the demo's networks; ``app`` serves it over HTTP."""

    def __init__(self, rpc_url: str, private_key: str, terms: dict[Mode, Terms]) -> None:
        signer = FacilitatorWeb3Signer(
            private_key, rpc_url, confirmation_timeout_seconds=CONFIRMATION_TIMEOUT_SECONDS
        )
        self.address = signer.address
        # One SDK facilitator per endpoint: the SDK turns a registration for one network into
        # the pattern "eip155:*", and the first registration matching a network wins, so a
        # single facilitator would send mainnet payments to the sandbox chain's signer.
        self._by_network: dict[str, x402FacilitatorSync] = {}
        self.settle_only_verified: set[str] = set()
        for item in terms.values():
            chain_signer: Any = signer
            if not item.settles:
                chain_signer = VerifyOnlySigner(signer.address, item.asset)
                self.settle_only_verified.update({item.network, item.v1_network})
            facilitator = x402FacilitatorSync()
            facilitator.register([item.network], ExactEvmFacilitatorScheme(chain_signer))
            facilitator.register_v1([item.v1_network], ExactEvmSchemeV1(chain_signer))
            self._by_network[item.network] = self._by_network[item.v1_network] = facilitator

    # ---- the operations, on SDK models ----

    def supported(self) -> dict[str, Any]:
        kinds: list[Any] = []
        signers: dict[str, list[str]] = {}
        for facilitator in dict.fromkeys(self._by_network.values()):
            supported = facilitator.get_supported()
            kinds += supported.kinds
            for family, addresses in supported.signers.items():
                known = signers.setdefault(family, [])
                known += [a for a in addresses if a not in known]
        return _dump(SupportedResponse(kinds=kinds, extensions=[], signers=signers))

    def verify(self, body: object) -> dict[str, Any]:
        payload, requirements = _parse(body)
        try:
            result = self._for(str(requirements.network)).verify(payload, requirements)
        except SchemeNotFoundError as exc:
            result = VerifyResponse(is_valid=False, invalid_reason="unsupported_scheme")
            log.info("verify_unsupported", detail=str(exc))
        log.info(
            "verify",
            network=requirements.network,
            valid=result.is_valid,
            reason=result.invalid_reason,
        )
        return _dump(result)

    def settle(self, body: object) -> dict[str, Any]:
        payload, requirements = _parse(body)
        network = str(requirements.network)
        if network in self.settle_only_verified:
            result = SettleResponse(
                success=False,
                error_reason=SETTLEMENT_UNAVAILABLE,
                error_message=(
                    f"the local demo facilitator cannot settle on {network}: "
                    "pay the sandbox endpoint (X-Sandbox-Mode: true) to move test USDC"
                ),
                transaction="",
                network=network,
            )
        else:
            try:
                result = self._for(network).settle(payload, requirements)
            except SchemeNotFoundError:
                result = SettleResponse(
                    success=False,
                    error_reason="unsupported_scheme",
                    transaction="",
                    network=network,
                )
        log.info(
            "settle",
            network=network,
            success=result.success,
            reason=result.error_reason,
            transaction=result.transaction or None,
        )
        return _dump(result)

    def _for(self, network: str) -> x402FacilitatorSync:
        facilitator = self._by_network.get(network)
        if facilitator is None:
            raise SchemeNotFoundError("exact", network)
        return facilitator

    # ---- HTTP ----

    def app(self) -> Starlette:
        def supported(request: Request) -> Response:
            return JSONResponse(self.supported())

        async def verify(request: Request) -> Response:
            return await _call(request, self.verify)

        async def settle(request: Request) -> Response:
            return await _call(request, self.settle)

        def healthz(request: Request) -> Response:
            return JSONResponse({"status": "ok", "address": self.address})

        return Starlette(
            routes=[
                Route("/supported", supported, methods=["GET"]),
                Route("/verify", verify, methods=["POST"]),
                Route("/settle", settle, methods=["POST"]),
                Route("/healthz", healthz, methods=["GET"]),
            ]
        )


class BadRequest(ValueError):
    pass


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def _parse(body: object) -> tuple[Any, Any]:
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    payload_raw = body.get("paymentPayload")
    requirements_raw = body.get("paymentRequirements")
    if not isinstance(payload_raw, dict) or not isinstance(requirements_raw, dict):
        raise BadRequest("paymentPayload and paymentRequirements are required objects")
    try:
        payload = parse_payment_payload(payload_raw)
        requirements = parse_payment_requirements(payload.x402_version, requirements_raw)
    except (ValidationError, ValueError) as exc:
        raise BadRequest(f"invalid payment payload or requirements: {exc}") from None
    version = body.get("x402Version", payload.x402_version)
    if version != payload.x402_version:
        raise BadRequest("x402Version differs from the payment payload's")
    return payload, requirements


async def _call(request: Request, operation: Any) -> Response:
    try:
        body = await request.json()
    except ValueError:
        return JSONResponse({"error": "the body must be JSON"}, status_code=400)
    try:
        # The SDK facilitator blocks on JSON-RPC: keep it off the event loop.
        result = await run_in_threadpool(operation, body)
    except BadRequest as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    except Exception as exc:  # the chain is down, or the SDK failed: the caller sees a 502
        log.exception("facilitator_failed", error=type(exc).__name__)
        return JSONResponse({"error": f"the facilitator failed: {type(exc).__name__}"}, 502)
    return JSONResponse(result)
