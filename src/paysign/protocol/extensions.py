"""x402 v2 extensions in the payment, as the reference clients answer them.

The seller's ``paymentRequired.extensions`` go back in the payment payload. Those a client is
expected to fill in are filled in; every other one is passed through verbatim:

- ``payment-identifier``: the seller's idempotency key. Its declaration
  (``{"info": {"required": bool}, "schema": …}``) comes back with ``info.id`` added, as the
  SDK's ``append_payment_identifier_to_extensions`` does. The id is the authorization's nonce
  (``pay_`` + 64 hex digits): unique per signature, as the extension asks, and the same on every
  retry of one signature (spec 4.1 rule 6), which is what lets the seller deduplicate them.

    >>> declared = {"payment-identifier": {"info": {"required": True}, "schema": {}},
    ...             "bazaar": {"info": {}}}
    >>> answered = answered_extensions(declared, bytes(31) + b"\\x01")
    >>> answered["payment-identifier"]["info"]["id"]
    'pay_0000000000000000000000000000000000000000000000000000000000000001'
    >>> answered["bazaar"] is declared["bazaar"], "id" in declared["payment-identifier"]["info"]
    (True, False)
"""

from __future__ import annotations

from typing import Any

PAYMENT_IDENTIFIER = "payment-identifier"


def payment_identifier(nonce: bytes) -> str:
    """The payment's id: 16-128 of ``[A-Za-z0-9_-]``, as the extension's schema allows."""
    return "pay_" + nonce.hex()


def answered_extensions(declared: Any, nonce: bytes) -> Any:
    """The extensions to send back for a payment with ``nonce``; ``declared`` is not changed."""
    if not isinstance(declared, dict):
        return declared
    extension = declared.get(PAYMENT_IDENTIFIER)
    if not isinstance(extension, dict):
        return declared
    info = extension.get("info")
    if not isinstance(info, dict) or not isinstance(info.get("required"), bool):
        return declared  # not the extension's shape: passed through, as the SDK client does
    answered_info = {**info, "id": payment_identifier(nonce)}
    return {**declared, PAYMENT_IDENTIFIER: {**extension, "info": answered_info}}
