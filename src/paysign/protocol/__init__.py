"""The pure x402 layer: parse seller terms, hash and sign EIP-3009, encode the payment header.

No I/O, no clock, no randomness: callers pass ``now`` and ``nonce``.
"""

from paysign.protocol.eip712 import (
    DigestSigner,
    PrivateKeySigner,
    WalletSigner,
    address_of,
    checksum_address,
    domain_separator,
    sign_digest,
    transfer_authorization_digest,
)
from paysign.protocol.networks import (
    BASE_MAINNET,
    BASE_SEPOLIA,
    AssetRegistry,
    Network,
    UsdcToken,
    parse_address,
    resolve_network,
)
from paysign.protocol.payload import (
    PreparedPayment,
    SignedPayment,
    encode_header,
    prepare_payment,
    sign_payment,
    valid_before_for,
)
from paysign.protocol.terms import PaymentTerms, SignatureRequest, parse_signature_request

__all__ = [
    "BASE_MAINNET",
    "BASE_SEPOLIA",
    "AssetRegistry",
    "DigestSigner",
    "Network",
    "PaymentTerms",
    "PreparedPayment",
    "PrivateKeySigner",
    "SignatureRequest",
    "SignedPayment",
    "UsdcToken",
    "WalletSigner",
    "address_of",
    "checksum_address",
    "domain_separator",
    "encode_header",
    "parse_address",
    "parse_signature_request",
    "prepare_payment",
    "resolve_network",
    "sign_digest",
    "sign_payment",
    "transfer_authorization_digest",
    "valid_before_for",
]
