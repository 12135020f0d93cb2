"""Payee rules: which addresses (the terms' ``payTo``) may be paid, whatever the seller.

Seller rules judge where a request says it pays; payee rules judge who receives the money. A
denied payee is refused before anything else; a non-empty allow list refuses every payee not on
it. An address is written as hex, in lower case or checksummed (EIP-55): a mixed-case address
whose checksum is wrong is refused, since it is most likely mistyped.

    >>> rules = parse_payee_rules({"allow": [], "deny": ["0x" + "ab" * 20]}, "/payTo")
    >>> rules.refusal(bytes.fromhex("ab" * 20))
    'deny'
    >>> rules.refusal(bytes(20)) is None
    True
    >>> PayeeRules(allow=frozenset({bytes(20)})).refusal(bytes.fromhex("ab" * 20))
    'allow'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import orjson

from paysign.errors import InvalidPolicy
from paysign.protocol.eip712 import checksum_address, wrong_checksum

#: Addresses per list: they travel with every signing request's policy row.
MAX_PAYEES_PER_LIST = 1_000


@dataclass(frozen=True, slots=True)
class PayeeRules:
    allow: frozenset[bytes] = field(default_factory=frozenset)
    deny: frozenset[bytes] = field(default_factory=frozenset)

    def __bool__(self) -> bool:
        return bool(self.allow or self.deny)

    def refusal(self, pay_to: bytes) -> Literal["deny", "allow"] | None:
        """Which list refuses ``pay_to``: ``"deny"`` (on it) or ``"allow"`` (not on a
        non-empty one); ``None`` when it may be paid."""
        if pay_to in self.deny:
            return "deny"
        if self.allow and pay_to not in self.allow:
            return "allow"
        return None

    def render(self) -> dict[str, list[str]]:
        return {"allow": _rendered(self.allow), "deny": _rendered(self.deny)}


NO_PAYEE_RULES = PayeeRules()


def _rendered(addresses: frozenset[bytes]) -> list[str]:
    return [checksum_address(a) for a in sorted(addresses)]


def parse_payee_rules(value: object, pointer: str) -> PayeeRules:
    """``{"allow": [...], "deny": [...]}`` (either list may be left out); ``InvalidPolicy``
    naming the place otherwise."""
    if not isinstance(value, dict):
        raise InvalidPolicy(pointer, 'must be an object like {"allow": [], "deny": []}')
    extra = sorted(set(value) - {"allow", "deny"})
    if extra:
        raise InvalidPolicy(f"{pointer}/{extra[0]}", "unknown list; the lists are allow, deny")
    allow = _addresses(value.get("allow", []), f"{pointer}/allow")
    deny = _addresses(value.get("deny", []), f"{pointer}/deny")
    both = sorted(allow & deny)
    if both:
        shown = checksum_address(both[0])
        raise InvalidPolicy(f"{pointer}/allow", f"{shown} is on both the allow and the deny list")
    return PayeeRules(allow, deny)


def _addresses(value: object, pointer: str) -> frozenset[bytes]:
    if not isinstance(value, list):
        raise InvalidPolicy(pointer, "must be an array of 0x-prefixed addresses")
    if len(value) > MAX_PAYEES_PER_LIST:
        raise InvalidPolicy(pointer, f"may hold at most {MAX_PAYEES_PER_LIST} addresses")
    return frozenset(_address(text, f"{pointer}/{i}") for i, text in enumerate(value))


def _address(text: object, pointer: str) -> bytes:
    if not isinstance(text, str) or len(text) != 42 or text[:2] != "0x":
        raise InvalidPolicy(pointer, "must be a 0x-prefixed 20-byte hex address")
    try:
        address = bytes.fromhex(text[2:])
    except ValueError:
        raise InvalidPolicy(pointer, "must be a 0x-prefixed 20-byte hex address") from None
    if len(address) != 20:
        raise InvalidPolicy(pointer, "must be a 0x-prefixed 20-byte hex address")
    if wrong_checksum(text, address):
        raise InvalidPolicy(
            pointer, f"has a wrong EIP-55 checksum (mistyped?); write it as {text.lower()}"
        )
    return address


def stored_payee_rules(rules: PayeeRules) -> str | None:
    """The rules as the policy row keeps them (``None`` for none)."""
    if not rules:
        return None
    return orjson.dumps({"allow": _hex(rules.allow), "deny": _hex(rules.deny)}).decode()


def _hex(addresses: frozenset[bytes]) -> list[str]:
    return ["0x" + a.hex() for a in sorted(addresses)]


@lru_cache(maxsize=1024)
def payee_rules_of(stored: str | None) -> PayeeRules:
    """The rules from the policy row's text; memoised, as every signing request reads it."""
    if stored is None:
        return NO_PAYEE_RULES
    value: Any = orjson.loads(stored)
    return parse_payee_rules(value, "/payTo")
