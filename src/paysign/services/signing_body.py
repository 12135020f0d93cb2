"""A signing request's body, checked before any transaction: its terms valid and signable, on
the testnet when the sandbox is asked for, and bound to the seller it names."""

from __future__ import annotations

from paysign.errors import InvalidPaymentTerms, SandboxNetworkMismatch, SellerResourceMismatch
from paysign.policy.binding import unbound_resource
from paysign.policy.rules import unnamable
from paysign.policy.seller import SellerLocation, seller_location
from paysign.protocol import PaymentTerms, parse_signature_request
from paysign.protocol.terms import resource_urls
from paysign.services.signing_context import SigningDeps


def checked_body(
    deps: SigningDeps, body: object, sandbox: bool
) -> tuple[PaymentTerms, SellerLocation]:
    """The terms ``body`` holds and the seller it names, bound to each other; raises the
    refusal an invalid body gets. ``body`` is decoded JSON, or raw bytes, decoded and validated
    once per distinct body (``RequestBodies``)."""
    if isinstance(body, bytes):
        request = deps.bodies.validated(body)
    else:
        request = parse_signature_request(body, deps.registry)
    if sandbox and not request.terms.network.testnet:
        raise SandboxNetworkMismatch(
            f"X-Sandbox-Mode: true was sent for a payment on {request.terms.network_name}; "
            "sandbox payments must be on the testnet (eip155:84532). "
            "Omit the header to make a live payment.",
        )
    try:
        seller = seller_location(request.seller_url)
    except ValueError as exc:
        raise InvalidPaymentTerms("/sellerUrl", str(exc)) from None
    why = unnamable(str(seller))
    if why is not None:  # it could wait for approval for ever, filling the holder's queue
        raise InvalidPaymentTerms(
            "/sellerUrl", f"names a seller no policy rule can name, so none can approve it: {why}"
        )
    unbound = unbound_resource(request.seller_url, resource_urls(request.terms))
    if unbound is not None:
        if unbound.resource_host is None:
            raise InvalidPaymentTerms(unbound.pointer, unbound.reason)
        raise SellerResourceMismatch(
            unbound.pointer, unbound.reason, unbound.seller_host, unbound.resource_host
        )
    return request.terms, seller


__all__ = ["checked_body"]
