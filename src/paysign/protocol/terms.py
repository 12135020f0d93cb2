"""Parse and validate a signature request: the seller URL plus the seller's x402 terms.

Only ``accepts[0]`` is signed. Every refusal names the offending field with a JSON pointer:

    >>> from paysign.protocol.networks import AssetRegistry
    >>> registry = AssetRegistry.from_addresses(
    ...     mainnet="0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", mainnet_name="USD Coin",
    ...     testnet="0x036CbD53842c5426634e7929541eC2318f3dCF7e", testnet_name="USDC", version="2")
    >>> parse_signature_request({"sellerUrl": "https://a.example/x"}, registry)
    Traceback (most recent call last):
    ...
    paysign.errors.MalformedRequest: /paymentRequired: is required

The three error kinds: :class:`MalformedRequest` for a wrong JSON shape or type,
:class:`InvalidPaymentTerms` for values no USDC contract would accept, and
:class:`UnsupportedPaymentTerms` for valid x402 that paysign does not sign (scheme, network,
asset, transfer method).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import orjson

from paysign.errors import InvalidPaymentTerms, MalformedRequest, UnsupportedPaymentTerms
from paysign.protocol.eip712 import wrong_checksum
from paysign.protocol.networks import AssetRegistry, Network, UsdcToken, resolve_network
from paysign.protocol.payment_required import amount_member

MAX_SELLER_URL_LENGTH = 2048
# Larger than any USDC balance can be (total supply is ~2**55 base units), and it keeps the
# amount inside a signed 64-bit integer for storage and spend accounting.
MAX_AMOUNT = 2**63 - 1
_UINT256_DIGITS = len(str(2**256 - 1))
# Lower-case "0x" only: no facilitator reads "0X".
_HEX_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_ZERO_ADDRESS = bytes(20)
# orjson reads an integer outside int64..uint64 as a float.
_LOWEST_JSON_INTEGER, _HIGHEST_JSON_INTEGER = -(2**63), 2**64 - 1
_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_ACCEPTS0 = "/paymentRequired/accepts/0"


@dataclass(frozen=True, slots=True)
class PaymentTerms:
    """The validated first payment option, plus what a v2 payload must echo verbatim."""

    x402_version: int  # 1 or 2
    network: Network  # resolved; v1 aliases are accepted in v2 terms too
    network_name: str  # exactly as the seller spelled it
    amount: int  # USDC base units
    token: UsdcToken  # the registry's USDC for ``network``; its domain equals the seller's extra
    pay_to: bytes  # 20 bytes
    max_timeout_seconds: int
    accepted: dict[str, Any]  # paymentRequired.accepts[0], the very object received
    resource: Any | None  # paymentRequired.resource verbatim; None when absent
    extensions: Any | None  # paymentRequired.extensions verbatim; None when absent or null


@dataclass(frozen=True, slots=True)
class SignatureRequest:
    seller_url: str
    terms: PaymentTerms


def parse_signature_request(body: object, registry: AssetRegistry) -> SignatureRequest:
    """Validate a decoded request body; raise one of the three domain errors, nothing else."""
    if not isinstance(body, dict):
        raise MalformedRequest("", "the request body must be a JSON object")
    seller_url = _seller_url(_required(body, "sellerUrl", "/sellerUrl"))
    payment_required = _required(body, "paymentRequired", "/paymentRequired")
    if not isinstance(payment_required, dict):
        raise MalformedRequest("/paymentRequired", "must be an object")
    return SignatureRequest(seller_url, _payment_terms(payment_required, registry))


def _payment_terms(payment_required: dict[str, Any], registry: AssetRegistry) -> PaymentTerms:
    version = _x402_version(payment_required)
    resource = _resource(payment_required, version)
    accepts = _required(payment_required, "accepts", "/paymentRequired/accepts")
    if not isinstance(accepts, list) or not accepts:
        raise MalformedRequest("/paymentRequired/accepts", "must be a non-empty array")
    accepted = accepts[0]
    if not isinstance(accepted, dict):
        raise MalformedRequest(_ACCEPTS0, "must be an object")

    scheme = _string_field(accepted, "scheme")
    if scheme != "exact":
        raise UnsupportedPaymentTerms(
            f"{_ACCEPTS0}/scheme",
            f"scheme {_shown(scheme)} is not supported; only 'exact' is signed",
        )
    network_name = _string_field(accepted, "network")
    network = resolve_network(network_name)
    if network is None:
        raise UnsupportedPaymentTerms(
            f"{_ACCEPTS0}/network",
            f"network {_shown(network_name)} is not supported; use eip155:8453 or eip155:84532",
        )
    token = registry.usdc_for(network)
    if token is None:
        raise UnsupportedPaymentTerms(
            f"{_ACCEPTS0}/network", f"no USDC contract is configured for {network.caip2}"
        )
    amount = _amount(accepted, version)
    asset = _address_field(accepted, "asset")
    if asset != token.address:
        raise UnsupportedPaymentTerms(
            f"{_ACCEPTS0}/asset", f"only USDC ({token.address_hex}) is signed on {network.caip2}"
        )
    pay_to = _pay_to(accepted)
    max_timeout = _max_timeout_seconds(accepted)
    _check_extra(accepted, token)

    extensions = payment_required.get("extensions")
    if extensions is not None and not isinstance(extensions, dict):
        raise MalformedRequest("/paymentRequired/extensions", "must be an object when present")
    # The signed payload echoes these verbatim; refuse now anything that cannot be re-encoded
    # (nesting deeper than orjson's 255 levels) so signing cannot fail. An integer beyond 64
    # bits was already read as a float by orjson, and is echoed as one.
    try:
        orjson.dumps((accepted, resource, extensions))  # one call when all is well
    except orjson.JSONEncodeError:
        _require_encodable(accepted, _ACCEPTS0)
        _require_encodable(resource, "/paymentRequired/resource")
        _require_encodable(extensions, "/paymentRequired/extensions")

    return PaymentTerms(
        x402_version=version,
        network=network,
        network_name=network_name,
        amount=amount,
        token=token,
        pay_to=pay_to,
        max_timeout_seconds=max_timeout,
        accepted=accepted,
        resource=resource,
        extensions=extensions,
    )


def resource_urls(terms: PaymentTerms) -> tuple[tuple[str, str], ...]:
    """Every URL the terms name as the paid resource, each with its JSON pointer in the request:
    v2's ``resource.url``, v1's ``accepts[0].resource`` (and a v1 top-level ``resource``, which
    some sellers add). Empty when the terms name none.
    """
    found: list[tuple[str, str]] = []
    top = terms.resource
    if isinstance(top, dict) and isinstance(top.get("url"), str) and top["url"]:
        found.append(("/paymentRequired/resource/url", top["url"]))
    elif isinstance(top, str) and top:
        found.append(("/paymentRequired/resource", top))
    inner = terms.accepted.get("resource")
    if isinstance(inner, str) and inner:
        found.append((f"{_ACCEPTS0}/resource", inner))
    return tuple(found)


def _shown(value: object) -> str:
    """The seller's value for an error message, cut short: it may be megabytes long."""
    text = repr(value)
    return text if len(text) <= 64 else text[:61] + "..."


def _required(obj: dict[str, Any], key: str, pointer: str) -> Any:
    if key not in obj:
        raise MalformedRequest(pointer, "is required")
    return obj[key]


def _is_int(value: object) -> bool:
    # bool is a subclass of int in Python, but JSON true is not a number.
    return isinstance(value, int) and not isinstance(value, bool)


def _seller_url(value: object) -> str:
    if not isinstance(value, str):
        raise MalformedRequest("/sellerUrl", "must be a string")
    if len(value) > MAX_SELLER_URL_LENGTH:
        raise InvalidPaymentTerms("/sellerUrl", f"must be at most {MAX_SELLER_URL_LENGTH} chars")
    return _checked_seller_url(value)


@lru_cache(maxsize=4096)
def _checked_seller_url(value: str) -> str:
    # An agent pays the same few sellers again and again; a refusal raises, so is never cached.
    reason = "must be an absolute http or https URL with a host"
    if _SPACE_OR_CONTROL.search(value):
        raise InvalidPaymentTerms("/sellerUrl", f"{reason}, without spaces or control characters")
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises ValueError for a port outside 0..65535
    except ValueError:
        raise InvalidPaymentTerms("/sellerUrl", reason) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidPaymentTerms("/sellerUrl", reason)
    return value


def _x402_version(payment_required: dict[str, Any]) -> int:
    pointer = "/paymentRequired/x402Version"
    version = _required(payment_required, "x402Version", pointer)
    if not _is_int(version):
        raise MalformedRequest(pointer, "must be an integer")
    if version not in (1, 2):
        raise InvalidPaymentTerms(pointer, f"x402 version {version} is unknown; use 1 or 2")
    return int(version)


def _resource(payment_required: dict[str, Any], version: int) -> Any | None:
    pointer = "/paymentRequired/resource"
    if version == 1:
        # A v1 402 body has no top-level resource (each accepts entry names its URL).
        resource = payment_required.get("resource")
        if resource is not None and not isinstance(resource, dict | str):
            raise MalformedRequest(pointer, "must be an object or a URL string when present")
        return resource
    resource = _required(payment_required, "resource", pointer)
    if not isinstance(resource, dict):
        raise MalformedRequest(pointer, "must be an object")
    url = resource.get("url")
    if not isinstance(url, str) or not url:
        raise MalformedRequest(f"{pointer}/url", "must be a non-empty string")
    return resource


def _string_field(accepted: dict[str, Any], key: str) -> str:
    value = _required(accepted, key, f"{_ACCEPTS0}/{key}")
    if not isinstance(value, str):
        raise MalformedRequest(f"{_ACCEPTS0}/{key}", "must be a string")
    return value


def _address_field(accepted: dict[str, Any], key: str) -> bytes:
    text = _string_field(accepted, key)
    if not _HEX_ADDRESS.fullmatch(text):
        raise InvalidPaymentTerms(f"{_ACCEPTS0}/{key}", "must be 0x followed by 40 hex digits")
    return bytes.fromhex(text[2:])


def _amount(accepted: dict[str, Any], version: int) -> int:
    key = amount_member(accepted, version)
    pointer = f"{_ACCEPTS0}/{key}"
    value = accepted.get(key)
    if value is None:
        needed = "is required" if version == 2 else "is required (or maxAmountRequired)"
        raise MalformedRequest(pointer, needed)
    # A string only: the entry is echoed to the seller verbatim, and x402 SDKs refuse a number.
    if not isinstance(value, str):
        raise MalformedRequest(pointer, "must be a decimal string of base units")
    if not (value.isascii() and value.isdigit()):  # isdigit alone admits non-ASCII digits
        raise InvalidPaymentTerms(pointer, "must be a decimal string of base units")
    # Past 78 digits it exceeds uint256; skip int() of huge strings (slow, capped at 4300).
    amount = int(value) if len(value) <= _UINT256_DIGITS else MAX_AMOUNT + 1
    if not 1 <= amount <= MAX_AMOUNT:
        raise InvalidPaymentTerms(
            pointer, f"must be between 1 and {MAX_AMOUNT} base units (more than any USDC balance)"
        )
    return amount


def _pay_to(accepted: dict[str, Any]) -> bytes:
    pointer = f"{_ACCEPTS0}/payTo"
    address = _address_field(accepted, "payTo")
    if address == _ZERO_ADDRESS:
        raise InvalidPaymentTerms(pointer, "is the zero address, which USDC cannot pay")
    if wrong_checksum(accepted["payTo"], address):
        raise InvalidPaymentTerms(
            pointer, "has a wrong EIP-55 checksum (its letter case): the address was mistyped"
        )
    return address


def _max_timeout_seconds(accepted: dict[str, Any]) -> int:
    pointer = f"{_ACCEPTS0}/maxTimeoutSeconds"
    value = _required(accepted, "maxTimeoutSeconds", pointer)
    if isinstance(value, float) and _beyond_json_integers(value):
        raise InvalidPaymentTerms(pointer, "is out of range")
    if not _is_int(value):  # 60.0 is refused too: the schema says integer
        raise MalformedRequest(pointer, "must be an integer")
    if value < 1:
        raise InvalidPaymentTerms(pointer, "must be at least 1 second")
    return int(value)


def _check_extra(accepted: dict[str, Any], token: UsdcToken) -> None:
    pointer = f"{_ACCEPTS0}/extra"
    extra = _required(accepted, "extra", pointer)
    if not isinstance(extra, dict):
        raise MalformedRequest(pointer, "must be an object holding the token's name and version")
    method = extra.get("assetTransferMethod")
    if method is not None and method != "eip3009":
        # permit2 / erc7710 need different typed data; signing EIP-3009 instead would be refused.
        raise UnsupportedPaymentTerms(
            f"{pointer}/assetTransferMethod",
            f"transfer method {_shown(method)} is not supported; only 'eip3009' is signed",
        )
    for key, expected in (("name", token.name), ("version", token.version)):
        value = extra.get(key)
        if not isinstance(value, str):
            raise InvalidPaymentTerms(
                f"{pointer}/{key}", f"must be a string (the token's EIP-712 domain {key})"
            )
        if value != expected:
            raise InvalidPaymentTerms(
                f"{pointer}/{key}",
                f"{_shown(value)} is not the EIP-712 domain {key} of USDC on {token.network.caip2} "
                f"({expected!r}); a signature over it would not verify at the USDC contract",
            )


def _require_encodable(value: Any, pointer: str) -> None:
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        raise MalformedRequest(
            pointer, "is nested too deeply or holds an out-of-range number"
        ) from None


def _beyond_json_integers(value: float) -> bool:
    return value.is_integer() and not _LOWEST_JSON_INTEGER <= value <= _HIGHEST_JSON_INTEGER
