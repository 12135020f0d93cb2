"""The x402 wire formats as a buyer meets them: the seller's terms, the payment header, the
receipt. Pure functions, no I/O.

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
    >>> choose_option(required, BASE_MAINNET)
    Traceback (most recent call last):
    ...
    paysign.client.errors.NoAcceptableOption: the seller offers no USDC option on eip155:8453 \
(offered: exact eip155:84532 0x036CbD53842c5426634e7929541eC2318f3dCF7e)

Amounts are ``int`` base units (1 USDC = 1,000,000); :func:`parse_usdc` reads a decimal:

    >>> parse_usdc("0.05"), format_usdc(50_000)
    (50000, '0.05')
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from paysign.client.errors import InvalidPaymentRequired, NoAcceptableOption
from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA, Network, resolve_network

__all__ = [
    "BASE_MAINNET",
    "BASE_SEPOLIA",
    "DEFAULT_USDC",
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

#: The USDC contract of each network paysign signs on (Circle's; the dev chain deploys its test
#: USDC at Base Sepolia's address).
DEFAULT_USDC: dict[str, str] = {
    BASE_MAINNET.caip2: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    BASE_SEPOLIA.caip2: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
}

PAYMENT_REQUIRED_HEADER = "PAYMENT-REQUIRED"
PAYMENT_SIGNATURE_HEADER = "PAYMENT-SIGNATURE"  # v2
X_PAYMENT_HEADER = "X-PAYMENT"  # v1
PAYMENT_RESPONSE_HEADER = "PAYMENT-RESPONSE"  # v2
X_PAYMENT_RESPONSE_HEADER = "X-PAYMENT-RESPONSE"  # v1
SANDBOX_HEADER = "X-Sandbox-Mode"

_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_USDC_UNITS = Decimal(1_000_000)


@dataclass(frozen=True, slots=True)
class PaymentRequired:
    """The seller's decoded terms (``paymentRequired`` of the signing request)."""

    version: int  # 2, or 1 for v1 sellers
    document: dict[str, Any]  # exactly as received

    @property
    def accepts(self) -> list[Any]:
        accepts = self.document.get("accepts")
        return accepts if isinstance(accepts, list) else []

    @property
    def error(self) -> str | None:
        error = self.document.get("error")
        return error if isinstance(error, str) and error else None


@dataclass(frozen=True, slots=True)
class ChosenOption:
    """The payment option paysign will sign, and the terms with it moved first."""

    index: int  # where the seller listed it
    option: dict[str, Any]  # the seller's object, verbatim
    network: Network
    amount: int  # base units
    pay_to: str
    asset: str
    payment_required: dict[str, Any] = field(repr=False)  # accepts reordered, all else verbatim


@dataclass(frozen=True, slots=True)
class Settlement:
    """The seller's receipt: ``PAYMENT-RESPONSE`` (v2) or ``X-PAYMENT-RESPONSE`` (v1)."""

    success: bool
    transaction: str  # the transaction hash; "" when nothing was settled
    network: str
    payer: str | None
    error_reason: str | None
    raw: dict[str, Any] = field(repr=False)


def payment_header_name(version: int) -> str:
    """The header the payment goes in: ``PAYMENT-SIGNATURE`` (v2) or ``X-PAYMENT`` (v1)."""
    return X_PAYMENT_HEADER if version == 1 else PAYMENT_SIGNATURE_HEADER


def _b64json(value: str, what: str) -> Any:
    text = value.strip()
    if not _BASE64.fullmatch(text):
        raise InvalidPaymentRequired(f"the {what} header is not standard base64")
    try:
        return json.loads(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise InvalidPaymentRequired(f"the {what} header is not base64 JSON ({exc})") from None


def decode_payment_required(headers: Mapping[str, str], body: bytes) -> PaymentRequired:
    """The terms of a 402: the v2 ``PAYMENT-REQUIRED`` header if present, else a v1 JSON body.

    ``headers`` is looked up case-insensitively when it is an ``httpx.Headers``.
    """
    header = headers.get(PAYMENT_REQUIRED_HEADER)
    if header is not None:
        document = _b64json(header, PAYMENT_REQUIRED_HEADER)
    else:
        try:
            document = json.loads(body) if body else None
        except ValueError:
            document = None
        if not isinstance(document, dict) or document.get("x402Version") != 1:
            raise InvalidPaymentRequired(
                "the 402 response carries no x402 terms (no PAYMENT-REQUIRED header, and the "
                "body is not an x402 v1 document)"
            )
    if not isinstance(document, dict):
        raise InvalidPaymentRequired("the payment terms are not a JSON object")
    version = document.get("x402Version")
    if version not in (1, 2) or isinstance(version, bool):
        raise InvalidPaymentRequired(f"x402Version {version!r} is not 1 or 2")
    accepts = document.get("accepts")
    if not isinstance(accepts, list) or not accepts:
        raise InvalidPaymentRequired("the payment terms offer no payment option (accepts)")
    return PaymentRequired(int(version), document)


def _amount_of(option: dict[str, Any]) -> int | None:
    value = option.get("amount")
    if value is None:
        value = option.get("maxAmountRequired")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 78:
        return int(value)
    return None


def _describe(option: object) -> str:
    if not isinstance(option, dict):
        return "(not an object)"
    return " ".join(str(option.get(k, "?")) for k in ("scheme", "network", "asset"))


def choose_option(
    required: PaymentRequired,
    network: Network,
    *,
    usdc: Mapping[str, str] | None = None,
) -> ChosenOption:
    """The seller's ``exact`` USDC option on ``network`` (EIP-3009 transfer), moved first.

    ``usdc`` maps a CAIP-2 network id to its USDC contract (default :data:`DEFAULT_USDC`).
    Raises :class:`NoAcceptableOption` when the seller offers none.
    """
    registry = DEFAULT_USDC if usdc is None else usdc
    wanted_asset = registry.get(network.caip2, "").lower()
    accepts = required.accepts
    for index, option in enumerate(accepts):
        if not isinstance(option, dict) or option.get("scheme") != "exact":
            continue
        name = option.get("network")
        if not isinstance(name, str) or resolve_network(name) != network:
            continue
        asset = option.get("asset")
        if not isinstance(asset, str) or asset.lower() != wanted_asset:
            continue
        extra = option.get("extra")
        method = extra.get("assetTransferMethod") if isinstance(extra, dict) else None
        if method not in (None, "eip3009"):
            continue
        amount = _amount_of(option)
        if amount is None or amount < 1:
            continue
        reordered = dict(required.document)
        reordered["accepts"] = [option, *accepts[:index], *accepts[index + 1 :]]
        return ChosenOption(
            index=index,
            option=option,
            network=network,
            amount=amount,
            pay_to=str(option.get("payTo", "")),
            asset=asset,
            payment_required=reordered,
        )
    offered = "; ".join(_describe(option) for option in accepts)
    raise NoAcceptableOption(
        f"the seller offers no USDC option on {network.caip2} (offered: {offered})",
        network=network.caip2,
        offered=accepts,
    )


def decode_settlement(headers: Mapping[str, str]) -> Settlement | None:
    """The decoded receipt, or ``None`` when the seller sent none (or an unreadable one)."""
    value = headers.get(PAYMENT_RESPONSE_HEADER) or headers.get(X_PAYMENT_RESPONSE_HEADER)
    if not value:
        return None
    try:
        raw = _b64json(value, PAYMENT_RESPONSE_HEADER)
    except InvalidPaymentRequired:
        return None
    if not isinstance(raw, dict):
        return None
    payer = raw.get("payer")
    reason = raw.get("errorReason")
    return Settlement(
        success=raw.get("success") is True,
        transaction=str(raw.get("transaction") or ""),
        network=str(raw.get("network") or ""),
        payer=payer if isinstance(payer, str) else None,
        error_reason=reason if isinstance(reason, str) else None,
        raw=raw,
    )


def parse_usdc(text: str | int | Decimal) -> int:
    """USDC (a decimal, at most 6 places) to base units; ``ValueError`` otherwise.

    >>> parse_usdc("1"), parse_usdc("0.000001")
    (1000000, 1)
    """
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a USDC amount") from None
    units = value * _USDC_UNITS
    if not value.is_finite() or value < 0 or units != units.to_integral_value():
        raise ValueError(f"{text!r} is not a USDC amount (at most 6 decimal places, not negative)")
    return int(units)


def format_usdc(amount: int) -> str:
    """Base units as a USDC decimal without trailing zeros.

    >>> format_usdc(1_000_000), format_usdc(2_500)
    ('1', '0.0025')
    """
    text = f"{Decimal(amount) / _USDC_UNITS:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
