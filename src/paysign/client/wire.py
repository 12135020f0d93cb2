"""The x402 wire formats as a buyer meets them: the seller's terms, the payment header, the
receipt. Pure functions, no I/O; the decoding is :mod:`paysign.protocol.payment_required`'s,
raising this SDK's exceptions.

A 402 carries its terms in the ``PAYMENT-REQUIRED`` header (x402 v2, base64 JSON) or, from a v1
seller, in the JSON body:

    >>> import base64, json
    >>> option = {"scheme": "exact", "network": "eip155:84532", "amount": "10000",
    ...           "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e", "payTo": "0x" + "ab" * 20,
    ...           "maxTimeoutSeconds": 60, "extra": {"name": "USDC", "version": "2"}}
    >>> terms = {"x402Version": 2, "resource": {"url": "https://a.example/x"}, "accepts": [option]}
    >>> header = base64.b64encode(json.dumps(terms).encode()).decode()
    >>> required = decode_payment_required({"PAYMENT-REQUIRED": header}, b"{}")
    >>> required.version, payment_header_name(required.version)
    (2, 'PAYMENT-SIGNATURE')
    >>> choose_option(required, BASE_SEPOLIA).amount
    10000
    >>> choose_option(required, BASE_MAINNET)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    paysign.client.payment_errors.NoAcceptableOption: the seller offers no USDC option on ...

Amounts are ``int`` base units (1 USDC = 1,000,000); :func:`parse_usdc` reads a decimal:

    >>> parse_usdc("0.05"), format_usdc(50_000)
    (50000, '0.05')
"""

from __future__ import annotations

from collections.abc import Mapping

from paysign.client.payment_errors import InvalidPaymentRequired, NoAcceptableOption
from paysign.protocol import payment_required as _terms
from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA, Network
from paysign.protocol.payment_required import (
    DEFAULT_USDC,
    DEFAULT_USDC_DOMAIN,
    ChosenOption,
    PaymentRequired,
    Settlement,
    decode_settlement,
    payment_header_name,
)
from paysign.protocol.usdc import format_usdc, parse_usdc

__all__ = [
    "BASE_MAINNET",
    "BASE_SEPOLIA",
    "DEFAULT_USDC",
    "DEFAULT_USDC_DOMAIN",
    "ChosenOption",
    "PaymentRequired",
    "Settlement",
    "choose_option",
    "decode_payment_required",
    "decode_settlement",
    "format_usdc",
    "parse_usdc",
    "payment_header_name",
]

#: Asks for the sandbox: test USDC on Base Sepolia instead of real USDC on Base.
SANDBOX_HEADER = "X-Sandbox-Mode"


def decode_payment_required(headers: Mapping[str, str], body: bytes) -> PaymentRequired:
    """The terms of a 402: the v2 ``PAYMENT-REQUIRED`` header if present, else a v1 JSON body.

    ``headers`` is looked up case-insensitively when it is an ``httpx.Headers``. Raises
    :class:`InvalidPaymentRequired` when the 402 carries no readable terms.
    """
    try:
        return _terms.decode_payment_required(headers, body)
    except _terms.UnreadableTerms as exc:
        raise InvalidPaymentRequired(str(exc)) from None


def choose_option(
    required: PaymentRequired,
    network: Network,
    *,
    usdc: Mapping[str, str] | None = None,
    domains: Mapping[str, tuple[str, str]] | None = None,
) -> ChosenOption:
    """The seller's cheapest ``exact`` USDC option on ``network`` (EIP-3009 transfer), moved
    first; of options at one price, the seller's first.

    ``usdc`` maps a CAIP-2 network id to its USDC contract (default :data:`DEFAULT_USDC`), and
    ``domains`` to the EIP-712 (name, version) that contract verifies (default
    :data:`DEFAULT_USDC_DOMAIN` with the default contracts); an option naming another is skipped.
    Raises :class:`NoAcceptableOption` when the seller offers none.
    """
    try:
        return _terms.choose_option(required, network, usdc=usdc, domains=domains)
    except _terms.NoUsableOption as exc:
        raise NoAcceptableOption(str(exc), network=exc.network, offered=exc.offered) from None
