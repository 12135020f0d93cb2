"""Build, sign and encode the x402 payment payload a buyer sends to the seller.

Pure: the clock (``now``) and the randomness (``nonce``) are parameters.

    >>> encode_header({"x402Version": 2})
    'eyJ4NDAyVmVyc2lvbiI6Mn0='

Key order follows the x402 Python SDK's own models (``x402Version``, ``payload``, ``accepted``,
``resource``, ``extensions``; inside ``payload``: ``authorization`` then ``signature``), so for
the same terms, key, time and nonce the header is byte-identical to the SDK client's.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import orjson

from paysign.protocol.eip712 import (
    DigestSigner,
    checksum_address,
    domain_separator,
    transfer_authorization_digest,
)
from paysign.protocol.extensions import answered_extensions
from paysign.protocol.terms import PaymentTerms

#: A signature is never valid longer than this, whatever the seller allows: a leaked header is a
#: bearer payment until it expires.
MAX_SIGNATURE_LIFETIME_SECONDS = 120
# validAfter 0 is "valid at once" and sidesteps clock skew between us, the facilitator and the
# chain (USDC requires block.timestamp > validAfter).
VALID_AFTER = 0


@dataclass(frozen=True, slots=True)
class SignedPayment:
    header: str  # standard base64 (with '=' padding, one line) of compact UTF-8 JSON
    payload: dict[str, Any]  # the decoded payment payload (MCP callers send this object)
    valid_after: int  # always 0
    valid_before: int
    nonce: bytes  # 32 bytes
    from_address: bytes


def valid_before_for(terms: PaymentTerms, now: int) -> int:
    """Unix time the signature expires: ``now`` plus the seller's timeout, at most 120 s.

    The facilitator refuses a signature within 6 s of expiry, so a seller's tiny timeout makes
    an equally short-lived signature; that is the seller's choice.
    """
    return now + min(MAX_SIGNATURE_LIFETIME_SECONDS, terms.max_timeout_seconds)


@dataclass(frozen=True, slots=True, eq=False)
class PreparedPayment:
    """A payment whose digest is ready: everything of the authorization but its signature.

    The signing service records a payment, commits, and only then answers; ``signed()`` asks
    the signer for the signature then. A signer may have made it ahead, elsewhere (the
    custodial wallets' signer, ``custody.signer_process``); this object never changes.
    """

    terms: PaymentTerms
    signer: DigestSigner
    valid_before: int
    nonce: bytes
    digest: bytes

    def signed(self) -> SignedPayment:
        return _signed_payment(self, self.signer.sign_digest(self.digest))

    def __repr__(self) -> str:  # the signer hides its key; the digest and nonce are no secret
        return f"PreparedPayment(nonce=0x{self.nonce.hex()}, signer={self.signer!r})"


def prepare_payment(
    terms: PaymentTerms, signer: DigestSigner, *, now: int, nonce: bytes
) -> PreparedPayment:
    """Everything of ``sign_payment`` but the signature itself: the digest to sign."""
    if len(nonce) != 32:
        raise ValueError("the authorization nonce is 32 bytes")
    valid_before = valid_before_for(terms, now)
    token = terms.token  # its domain equals the seller's extra once the terms are parsed
    digest = transfer_authorization_digest(
        domain_separator(token.name, token.version, token.network.chain_id, token.address),
        signer.address,
        terms.pay_to,
        terms.amount,
        VALID_AFTER,
        valid_before,
        nonce,
    )
    return PreparedPayment(terms, signer, valid_before, nonce, digest)


def sign_payment(
    terms: PaymentTerms, signer: DigestSigner, *, now: int, nonce: bytes
) -> SignedPayment:
    """Sign an EIP-3009 ``TransferWithAuthorization`` for ``terms`` and wrap it for the seller.

    ``nonce`` must be 32 fresh random bytes: USDC settles each (from, nonce) pair once.
    """
    return prepare_payment(terms, signer, now=now, nonce=nonce).signed()


def _signed_payment(prepared: PreparedPayment, signature: bytes) -> SignedPayment:
    terms, valid_before, nonce = prepared.terms, prepared.valid_before, prepared.nonce
    address = prepared.signer.address
    inner: dict[str, Any] = {
        "authorization": {
            "from": checksum_address(address),
            # Checksummed whatever the seller's spelling: facilitators compare it to payTo
            # case-insensitively, but web3.py refuses a lower-case address in the simulation
            # of the transfer. The 20 bytes signed are the same.
            "to": checksum_address(terms.pay_to),
            "value": str(terms.amount),
            "validAfter": str(VALID_AFTER),
            "validBefore": str(valid_before),
            "nonce": "0x" + nonce.hex(),
        },
        "signature": "0x" + signature.hex(),
    }
    if terms.x402_version == 2:
        payload = _v2_payload(terms, inner, nonce)
    else:
        payload = _v1_payload(terms, inner)
    return SignedPayment(
        header=encode_header(payload),
        payload=payload,
        valid_after=VALID_AFTER,
        valid_before=valid_before,
        nonce=nonce,
        from_address=address,
    )


def _v2_payload(terms: PaymentTerms, inner: dict[str, Any], nonce: bytes) -> dict[str, Any]:
    # Sellers deep-compare ``accepted`` with their own terms, so it is the object received,
    # never rebuilt: same keys, same address casing, same nulls, same extra.
    payload: dict[str, Any] = {"x402Version": 2, "payload": inner, "accepted": terms.accepted}
    if terms.resource is not None:
        payload["resource"] = terms.resource
    if terms.extensions is not None:
        # Passed back; those a client must fill in (payment-identifier) are filled in.
        payload["extensions"] = answered_extensions(terms.extensions, nonce)
    return payload


def _v1_payload(terms: PaymentTerms, inner: dict[str, Any]) -> dict[str, Any]:
    # v1 carries scheme and network at the top level and nothing else; v1 sellers match on the
    # network string, so it keeps the seller's spelling.
    return {
        "x402Version": 1,
        "scheme": terms.accepted["scheme"],
        "network": terms.network_name,
        "payload": inner,
    }


def encode_header(payload: dict[str, Any]) -> str:
    """Standard-alphabet, padded, single-line base64 of compact JSON (TS sellers test
    ``^[A-Za-z0-9+/]*={0,2}$`` and refuse URL-safe or wrapped base64)."""
    return base64.b64encode(orjson.dumps(payload)).decode("ascii")
