"""JSON Schemas (2020-12, as OpenAPI 3.1 uses them) of what the API takes and returns.

A request schema refuses only what the server refuses (the checks live in ``protocol.terms``,
``policy.seller`` and the endpoints), and allows what the server tolerates: extra members, an
an amount with leading zeros. Where the server's rule is more than JSON Schema
can say, the schema allows a part the server surely takes and its description says the rest:
``sellerUrl``'s pattern is ASCII host names and unescaped paths, though valid IDNA hosts, IPv6
literals and escapes are taken too; nesting deeper than 255 levels is refused. The schemathesis
test (tests/api) holds the document and the server together.
"""

from __future__ import annotations

from typing import Any

from paysign.catalog.listing import TOOL_NAME
from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA, AssetRegistry
from paysign.protocol.terms import MAX_AMOUNT, MAX_SELLER_URL_LENGTH

Schema = dict[str, Any]

#: orjson reads a larger integer as a float, which the server refuses where it wants an integer.
MAX_JSON_INTEGER = 2**64 - 1
ADDRESS_PATTERN = "^0x[0-9a-fA-F]{40}$"
#: The server reads an amount of more digits than uint256 has as too large, zeros or not.
MAX_AMOUNT_DIGITS = len(str(2**256 - 1))

_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
# Two to five labels of at most 32 characters: well inside a host name's 253. A name of one
# label (but "localhost") is no seller a policy rule can name.
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?"
# The last label starts with a letter: one of digits (or 0x…) would make the host an IPv4
# address to a browser, and the server takes only the dotted-quad spelling of those.
_TOP_LABEL = "[A-Za-z](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?"
# 1 to 65535: no policy rule can name port 0, so no seller on it can be approved.
_PORT = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
# A path segment: no escapes, no backslash, and not ending in a dot unless it is "." or ".."
# (Windows servers drop a trailing dot, so the server refuses one); ";parameters" may follow.
_PCHAR = "[A-Za-z0-9_~!$&'()*+,=:@-]"
_SEGMENT = f"(?:\\.{{1,2}}|[.]*(?:{_PCHAR}+[.]+)*{_PCHAR}+)?(?:;[A-Za-z0-9_~!$&'()*+,=:@.;-]*)?"
SELLER_URL_PATTERN = (
    f"^[hH][tT][tT][pP][sS]?://(?:(?:{_LABEL}\\.){{1,4}}{_TOP_LABEL}|{_OCTET}(?:\\.{_OCTET}){{3}})"
    f"(?::{_PORT})?(?:/{_SEGMENT})*(?:[?#][!-~]*)?$"
)


def positive_decimal_pattern(maximum: int) -> str:
    """A regular expression (no anchors) for the decimal integers 1..``maximum`` written
    without leading zeros.

    >>> import re
    >>> pattern = re.compile(positive_decimal_pattern(305))
    >>> [n for n in range(0, 400) if pattern.fullmatch(str(n))] == list(range(1, 306))
    True
    >>> bool(pattern.fullmatch("0305"))
    False
    """
    digits = str(maximum)
    alternatives = []
    if len(digits) > 1:
        alternatives.append(f"[1-9][0-9]{{0,{len(digits) - 2}}}")
    for i, digit in enumerate(digits):
        lowest = 1 if i == 0 else 0
        if int(digit) > lowest:
            rest = len(digits) - i - 1
            below = f"[{lowest}-{int(digit) - 1}]" + (f"[0-9]{{{rest}}}" if rest else "")
            alternatives.append(digits[:i] + below)
    alternatives.append(digits)
    return "(?:" + "|".join(alternatives) + ")"


def any_case_hex(address: str) -> str:
    """A pattern for one address in any letter case, the way the server compares them."""
    body = "".join(c if c.isdigit() else f"[{c.lower()}{c.upper()}]" for c in address[2:])
    return f"^0x{body}$"


def _const_string(value: str) -> Schema:
    return {"type": "string", "const": value}


def amount_schema() -> Schema:
    return {
        "description": "Price in USDC base units (1 USDC = 1,000,000), at least 1 and at most "
        f"{MAX_AMOUNT}, as a decimal string (leading zeros are accepted). Not a JSON number: "
        "the entry is echoed to the seller, and x402 sellers refuse one.",
        "type": "string",
        "pattern": f"^0*{positive_decimal_pattern(MAX_AMOUNT)}$",
        "maxLength": MAX_AMOUNT_DIGITS,
    }


def _v1_amount(amount: Schema) -> Schema:
    return {
        "description": "`maxAmountRequired`, or `amount` when it is absent or null",
        "anyOf": [
            {"required": ["maxAmountRequired"], "properties": {"maxAmountRequired": amount}},
            {
                "required": ["amount"],
                "properties": {"amount": amount, "maxAmountRequired": {"type": "null"}},
            },
        ],
    }


def accepts_entry_schema(registry: AssetRegistry) -> Schema:
    """``accepts[0]``: one alternative per network the registry has USDC on, because the asset
    and the token's EIP-712 domain (``extra``) must be that network's USDC."""
    per_network = []
    for network in (BASE_MAINNET, BASE_SEPOLIA):
        token = registry.usdc_for(network)
        if token is None:
            continue
        per_network.append(
            {
                "properties": {
                    "network": {"type": "string", "enum": [network.caip2, network.v1_name]},
                    "asset": {"type": "string", "pattern": any_case_hex(token.address_hex)},
                    "extra": {
                        "type": "object",
                        "required": ["name", "version"],
                        "properties": {
                            "name": _const_string(token.name),
                            "version": _const_string(token.version),
                            "assetTransferMethod": {"enum": ["eip3009", None]},
                        },
                    },
                }
            }
        )
    return {
        "type": "object",
        "description": "The payment option to sign: the seller's first `accepts` entry, copied "
        "unchanged into the signed payload. Members not named here are kept, not refused.",
        "required": ["scheme", "network", "asset", "payTo", "maxTimeoutSeconds", "extra"],
        "properties": {
            "scheme": _const_string("exact"),
            "payTo": {
                "type": "string",
                "pattern": ADDRESS_PATTERN,
                "not": {"pattern": "^0x0{40}$"},
                "description": "Not the zero address. In mixed case the letters are an EIP-55 "
                "checksum, and a wrong one is refused as a mistyped address (422).",
            },
            "maxTimeoutSeconds": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_JSON_INTEGER,
                "description": "Seconds; the signature is valid for the lesser of this and 120.",
            },
        },
        "oneOf": per_network,
    }


def signature_request_schema(registry: AssetRegistry) -> Schema:
    amount = amount_schema()
    v2_amount = {"required": ["amount"], "properties": {"amount": amount}}
    v2_resource = {
        "type": "object",
        "description": "The seller's resource (`url`, `description`, `mimeType`), echoed into the "
        "payload as sent. `url`, resolved against `sellerUrl`, must be on the seller's host "
        "when it is an http(s) URL (422 `seller-resource-mismatch` otherwise); so must v1's "
        "`resource` and `accepts[0].resource`.",
        "required": ["url"],
        "properties": {"url": {"type": "string", "minLength": 1}},
    }
    return {
        "type": "object",
        "description": "Members other than these are ignored. Values are echoed into the signed "
        "payload, so they may not nest deeper than 255 levels.",
        "required": ["sellerUrl", "paymentRequired"],
        "properties": {
            "sellerUrl": {
                "type": "string",
                "maxLength": MAX_SELLER_URL_LENGTH,
                "pattern": SELLER_URL_PATTERN,
                "description": "The absolute http(s) URL being paid for; the source policy "
                "reads its host and path. No spaces or control characters; the host is a DNS "
                "name of two labels or more or a dotted IPv4 address (an IPv6 literal, an IDNA "
                "name or `localhost` is accepted too, when valid), at most 255 characters with "
                "its port (1 to 65535); the host and path together are at most 2048 characters "
                "once percent-encoded (a seller no policy rule could name is refused), and "
                "percent-escapes that decode to a control byte, an escape, non-UTF-8 or a "
                "segment ending in a dot or space are refused.",
            },
            "paymentRequired": {
                "type": "object",
                "description": "The seller's 402 terms, as decoded from PAYMENT-REQUIRED (v2) "
                "or the 402 body (v1). The price is `accepts[0].amount` in x402 v2; in v1 it is "
                "`maxAmountRequired` (what v1 facilitators check), or `amount` when that is "
                "absent.",
                "required": ["x402Version", "accepts"],
                "properties": {
                    "x402Version": {"type": "integer", "enum": [1, 2]},
                    "accepts": {
                        "type": "array",
                        "minItems": 1,
                        "prefixItems": [accepts_entry_schema(registry)],
                        "description": "Only the first entry is read and signed.",
                    },
                    "extensions": {"type": ["object", "null"]},
                },
                "oneOf": [
                    {
                        "required": ["resource"],
                        "properties": {
                            "x402Version": {"const": 2},
                            "resource": v2_resource,
                            "accepts": {"prefixItems": [v2_amount]},
                        },
                    },
                    {
                        "properties": {
                            "x402Version": {"const": 1},
                            "resource": {"type": ["object", "string", "null"]},
                            "accepts": {"prefixItems": [_v1_amount(amount)]},
                        }
                    },
                ],
            },
        },
    }


SIGNATURE_RESULT: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["paymentSignatureHeader", "validAfter", "validBefore", "nonce"],
    "properties": {
        "paymentSignatureHeader": {
            "type": "string",
            "pattern": "^[A-Za-z0-9+/]+={0,2}$",
            "description": "Base64 of the x402 payment payload; send it unchanged as "
            "PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1).",
        },
        "validAfter": {"type": "integer", "const": 0},
        "validBefore": {"type": "integer", "minimum": 1},
        "nonce": {"type": "string", "pattern": "^0x[0-9a-f]{64}$"},
    },
}

TEST_FUNDS_RESULT: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["transactionHash", "network", "token"],
    "properties": {
        "transactionHash": {"type": "string", "pattern": "^0x[0-9a-fA-F]{64}$"},
        "network": _const_string(BASE_SEPOLIA.caip2),
        "token": {"type": "string", "pattern": ADDRESS_PATTERN},
    },
}

PROBLEM: Schema = {
    "type": "object",
    "description": "RFC 9457. Some types add members (`pointer`, `retryAfterSeconds`, ...); "
    "the page at `type` says what they mean.",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string", "minLength": 1},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string"},
        "pointer": {"type": "string", "description": "JSON pointer (RFC 6901) to the field"},
    },
}

UNAUTHORIZED: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["message"],
    "properties": {"message": _const_string("Unauthorized")},
}

STATUS: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["status"],
    "properties": {"status": {"type": "string", "enum": ["ok", "unavailable"]}},
}


def _payment_details(network: str) -> Schema:
    return {
        "type": "object",
        "required": ["scheme", "network", "asset", "payTo", "maxTimeoutSeconds", "extra"],
        "properties": {
            "scheme": _const_string("exact"),
            "network": _const_string(network),
            "asset": {"type": "string", "pattern": ADDRESS_PATTERN},
            "payTo": {"type": "string", "pattern": ADDRESS_PATTERN},
            "maxTimeoutSeconds": {"type": "integer", "minimum": 1},
            "extra": {
                "type": "object",
                "required": ["name", "version"],
                "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
            },
        },
    }


def _listing(tiers: list[str]) -> Schema:
    input_item = {
        "type": "object",
        "required": ["key", "description", "required"],
        "properties": {
            "key": {"type": "string", "minLength": 1},
            "description": {"type": "string"},
            "required": {"type": "boolean"},
            # paysign's own, optional: the connector's tool schema for the argument.
            "type": {"type": "string", "enum": ["string", "integer", "number", "boolean"]},
            "enum": {"type": "array", "minItems": 1},
            "minimum": {"type": "number"},
            "maximum": {"type": "number"},
        },
    }
    inputs = {"type": "array", "items": input_item}
    scalar = {"type": ["string", "number"]}
    return {
        "type": "object",
        "description": "A listing as its seller published it; members not named here are "
        "passed through.",
        "required": [
            "id",
            "name",
            "url",
            "path",
            "description",
            "priceUsdc",
            "method",
            "tier",
            "sandboxAvailable",
            "inputs",
            "tags",
        ],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "name": {"type": "string", "pattern": TOOL_NAME.pattern},
            "url": {"type": "string", "pattern": r"^https?://[^/?#\s]+(/[^?#\s]*)?$"},
            "path": {"type": "string", "pattern": "^(/.*)?$"},
            "description": {"type": "string"},
            "priceUsdc": {"type": "number", "minimum": 0},
            "method": {"type": "string", "enum": ["GET", "POST"]},
            "tier": {"type": "string", "enum": tiers},
            "sandboxAvailable": {"type": "boolean"},
            "inputs": {
                "type": "object",
                "required": ["path", "query", "header"],
                "properties": {"path": inputs, "query": inputs, "header": inputs},
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "source": {
                "type": "object",
                "required": ["freshnessBand", "uptime", "license", "underlyingSource"],
                "properties": {
                    "freshnessBand": scalar,
                    "uptime": scalar,
                    "license": scalar,
                    "underlyingSource": scalar,
                },
            },
        },
        "allOf": [
            {
                "if": {"properties": {"tier": {"const": "PREMIUM"}}},
                "then": {"required": ["source"]},
            },
            {
                "if": {"properties": {"method": {"const": "POST"}}},
                "then": {"properties": {"inputs": {"required": ["body"]}}},
            },
        ],
    }


def catalog_document_schema(tiers: list[str]) -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["paymentDetails", "sandboxPaymentDetails", "catalog"],
        "properties": {
            "paymentDetails": {"type": "array", "items": _payment_details(BASE_MAINNET.caip2)},
            "sandboxPaymentDetails": {
                "type": "array",
                "items": _payment_details(BASE_SEPOLIA.caip2),
            },
            "catalog": {"type": "array", "items": _listing(tiers)},
        },
    }
