"""A seller's 402 as x402 defines it: the terms it carries, the option paysign can sign, the
header the payment goes back in, and the seller's receipt. Pure functions, no I/O.

The terms come in the ``PAYMENT-REQUIRED`` header (x402 v2, base64 JSON) or, from a v1 seller,
in the JSON body; they are kept exactly as received, for the signing request quotes them:

    >>> import json
    >>> option = {"scheme": "exact", "network": "base-sepolia", "maxAmountRequired": "10000",
    ...           "asset": DEFAULT_USDC["eip155:84532"], "payTo": "0x" + "ab" * 20,
    ...           "extra": {"name": "USDC", "version": "2"}}
    >>> body = json.dumps({"x402Version": 1, "accepts": [option]}).encode()
    >>> required = decode_payment_required({}, body)
    >>> required.version, payment_header_name(required.version)
    (1, 'X-PAYMENT')
    >>> chosen = choose_option(required, BASE_SEPOLIA)
    >>> chosen.amount, chosen.option is required.accepts[0]
    (10000, True)
    >>> choose_option(required, BASE_MAINNET)
    Traceback (most recent call last):
    ...
    paysign.protocol.payment_required.NoUsableOption: the seller offers no USDC option on \
eip155:8453 (offered: exact base-sepolia 0x036CbD53842c5426634e7929541eC2318f3dCF7e)

The buyer SDK and the connector both read sellers' 402s through this module; each turns its
two errors into its own (an SDK exception, a tool error).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA, Network, resolve_network
from paysign.protocol.untrusted import untrusted_json

__all__ = [
    "DEFAULT_USDC",
    "DEFAULT_USDC_DOMAIN",
    "PAYMENT_REQUIRED_HEADER",
    "ChosenOption",
    "NoUsableOption",
    "PaymentRequired",
    "Settlement",
    "UnreadableTerms",
    "choose_option",
    "decode_payment_required",
    "decode_settlement",
    "payment_header_name",
]


class UnreadableTerms(ValueError):
    """The 402 carries no x402 terms that can be read."""


class NoUsableOption(ValueError):
    """The seller offers no option paysign can sign on the wanted network."""

    def __init__(self, message: str, *, network: str, offered: list[Any]) -> None:
        super().__init__(message)
        self.network = network
        self.offered = offered


#: The USDC contract of each network paysign signs on (Circle's; the dev chain deploys its test
#: USDC at Base Sepolia's address).
DEFAULT_USDC: dict[str, str] = {
    BASE_MAINNET.caip2: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    BASE_SEPOLIA.caip2: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
}

#: The EIP-712 domain (name, version) each of those contracts verifies transfers with. A
#: signature over any other verifies nowhere.
DEFAULT_USDC_DOMAIN: dict[str, tuple[str, str]] = {
    BASE_MAINNET.caip2: ("USD Coin", "2"),
    BASE_SEPOLIA.caip2: ("USDC", "2"),
}

PAYMENT_REQUIRED_HEADER = "PAYMENT-REQUIRED"
PAYMENT_SIGNATURE_HEADER = "PAYMENT-SIGNATURE"  # v2
X_PAYMENT_HEADER = "X-PAYMENT"  # v1
PAYMENT_RESPONSE_HEADER = "PAYMENT-RESPONSE"  # v2
X_PAYMENT_RESPONSE_HEADER = "X-PAYMENT-RESPONSE"  # v1

_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
#: What a receipt's ``transaction`` must be: an EVM transaction hash. Anything else is the
#: seller's free text, which callers would print or link to as if it were a hash.
_TRANSACTION_HASH = re.compile(r"0x[0-9a-fA-F]{64}")


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
    transaction: str  # 0x + 64 hex digits; "" when the seller named none (or not a hash)
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
        raise UnreadableTerms(f"the {what} header is not standard base64")
    try:
        return untrusted_json(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise UnreadableTerms(f"the {what} header is not base64 JSON ({exc})") from None


def decode_payment_required(headers: Mapping[str, str], body: bytes) -> PaymentRequired:
    """The terms of a 402: the v2 ``PAYMENT-REQUIRED`` header if present, else a v1 JSON body.

    ``headers`` is looked up case-insensitively when it is an ``httpx.Headers``.
    """
    header = headers.get(PAYMENT_REQUIRED_HEADER)
    if header is not None:
        document = _b64json(header, PAYMENT_REQUIRED_HEADER)
    else:
        try:
            document = untrusted_json(body) if body else None
        except ValueError:
            document = None
        if not isinstance(document, dict) or document.get("x402Version") != 1:
            raise UnreadableTerms(
                "the 402 response carries no x402 terms (no PAYMENT-REQUIRED header, and the "
                "body is not an x402 v1 document)"
            )
    if not isinstance(document, dict):
        raise UnreadableTerms("the payment terms are not a JSON object")
    version = document.get("x402Version")
    if version not in (1, 2) or isinstance(version, bool):
        raise UnreadableTerms(f"x402Version {version!r} is not 1 or 2")
    accepts = document.get("accepts")
    if not isinstance(accepts, list) or not accepts:
        raise UnreadableTerms("the payment terms offer no payment option (accepts)")
    return PaymentRequired(int(version), document)


def amount_member(option: Mapping[str, Any], version: int) -> str:
    """The member of an ``accepts`` entry that holds its price, the one facilitators check:
    ``amount`` in x402 v2; ``maxAmountRequired`` in v1, or ``amount`` where a v1 seller wrote
    that instead.

    >>> amount_member({"maxAmountRequired": "5", "amount": "1"}, 1)
    'maxAmountRequired'
    >>> amount_member({"maxAmountRequired": "5"}, 2)
    'amount'
    """
    if version == 1 and option.get("maxAmountRequired") is not None:
        return "maxAmountRequired"
    return "amount"


def _amount_of(option: dict[str, Any], version: int) -> int | None:
    value = option.get(amount_member(option, version))
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
    domains: Mapping[str, tuple[str, str]] | None = None,
) -> ChosenOption:
    """The seller's cheapest ``exact`` USDC option on ``network`` (EIP-3009 transfer), moved
    first. Of options at one price, the seller's first.

    ``usdc`` maps a CAIP-2 network id to its USDC contract (default :data:`DEFAULT_USDC`), and
    ``domains`` to the EIP-712 domain that contract verifies (default
    :data:`DEFAULT_USDC_DOMAIN` with the default contracts, else none is checked). An option
    whose ``extra`` names another domain is skipped: paysign refuses to sign it.
    Raises :class:`NoUsableOption` when the seller offers none.
    """
    if domains is None:
        domains = DEFAULT_USDC_DOMAIN if usdc is None else {}
    wanted = _WantedOption(
        network,
        (DEFAULT_USDC if usdc is None else usdc).get(network.caip2, "").lower(),
        domains.get(network.caip2),
    )
    accepts = required.accepts
    best: tuple[int, int] | None = None  # (amount, index)
    for index, option in enumerate(accepts):
        amount = wanted.amount_of(option, required.version)
        if amount is not None and (best is None or amount < best[0]):
            best = (amount, index)
    if best is None:
        offered = "; ".join(_describe(option) for option in accepts)
        raise NoUsableOption(
            f"the seller offers no USDC option on {network.caip2} (offered: {offered})",
            network=network.caip2,
            offered=accepts,
        )
    amount, index = best
    option = accepts[index]
    reordered = dict(required.document)
    reordered["accepts"] = [option, *accepts[:index], *accepts[index + 1 :]]
    return ChosenOption(
        index=index,
        option=option,
        network=network,
        amount=amount,
        pay_to=str(option.get("payTo", "")),
        asset=str(option["asset"]),
        payment_required=reordered,
    )


@dataclass(frozen=True, slots=True)
class _WantedOption:
    """What an option must be for paysign to sign it: the checks of the signing request's
    terms that need no more than the option."""

    network: Network
    asset: str  # lower case
    domain: tuple[str, str] | None  # (name, version); None: not checked

    def amount_of(self, option: object, version: int) -> int | None:
        """The option's price in base units, or ``None`` when paysign cannot pay it."""
        if not isinstance(option, dict) or option.get("scheme") != "exact":
            return None
        name = option.get("network")
        if not isinstance(name, str) or resolve_network(name) != self.network:
            return None
        asset = option.get("asset")
        if not isinstance(asset, str) or asset.lower() != self.asset:
            return None
        extra = option.get("extra")
        if not isinstance(extra, dict) or extra.get("assetTransferMethod") not in (None, "eip3009"):
            return None
        domain = (extra.get("name"), extra.get("version"))
        if not all(isinstance(part, str) for part in domain):
            return None
        if self.domain is not None and domain != self.domain:
            return None
        amount = _amount_of(option, version)
        return amount if amount is not None and amount >= 1 else None


def decode_settlement(headers: Mapping[str, str]) -> Settlement | None:
    """The decoded receipt, or ``None`` when the seller sent none (or an unreadable one).

    ``transaction`` is kept only when it is a transaction hash (``0x`` + 64 hex digits); the
    seller's value as sent stays in ``raw``. ``network``, ``payer`` and ``error_reason`` are
    the seller's text: show them escaped.

    >>> header = base64.b64encode(rb'{"success": true, "transaction": "0x12\\u001b]0;x"}')
    >>> decode_settlement({PAYMENT_RESPONSE_HEADER: header.decode()}).transaction
    ''
    """
    value = headers.get(PAYMENT_RESPONSE_HEADER) or headers.get(X_PAYMENT_RESPONSE_HEADER)
    if not value:
        return None
    try:
        raw = _b64json(value, PAYMENT_RESPONSE_HEADER)
    except UnreadableTerms:
        return None
    if not isinstance(raw, dict):
        return None
    payer = raw.get("payer")
    reason = raw.get("errorReason")
    transaction = raw.get("transaction")
    return Settlement(
        success=raw.get("success") is True,
        transaction=(
            transaction
            if isinstance(transaction, str) and _TRANSACTION_HASH.fullmatch(transaction)
            else ""
        ),
        network=str(raw.get("network") or ""),
        payer=payer if isinstance(payer, str) else None,
        error_reason=reason if isinstance(reason, str) else None,
        raw=raw,
    )
