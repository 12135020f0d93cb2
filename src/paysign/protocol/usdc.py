"""USDC amounts: ``int`` base units (6 decimals, 1 USDC = 1,000,000) ↔ decimal text.

Every amount paysign stores, signs or compares is base units; text exists only at the edges
(a form, a CLI flag, a catalog price, a message). One place converts, so a price shown to a
buyer is the amount the signature carries.

    >>> format_usdc(1_500_000), format_usdc(10_000_000), format_usdc(1), format_usdc(0)
    ('1.5', '10', '0.000001', '0')
    >>> format_usdc(1_500_000, fixed=True), format_usdc(0, fixed=True)
    ('1.500000', '0.000000')
    >>> parse_usdc("0.05"), parse_usdc(2), parse_usdc(Decimal("0.000001"))
    (50000, 2000000, 1)
    >>> parse_usdc("0.0000001")
    Traceback (most recent call last):
    ValueError: '0.0000001' is not a USDC amount (at most 6 decimals, not negative)
    >>> base_units_at_most(Decimal("0.0000019")), base_units_at_most(Decimal("0.01"))
    (1, 10000)

Depends on nothing in paysign: the buyer SDK, the catalog and every entry point share it.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation, localcontext

__all__ = [
    "USDC_BASE_UNITS",
    "USDC_DECIMALS",
    "base_units_at_most",
    "base_units_of",
    "format_usdc",
    "parse_typed_usdc",
    "parse_usdc",
]

USDC_DECIMALS = 6
USDC_BASE_UNITS = 10**USDC_DECIMALS
_UINT256_DIGITS = 78
# ASCII digits, a dot for decimals, commas only between groups of three: "0,5" on a phone
# whose keypad has a decimal comma must not be read as 5.
_TYPED = re.compile(r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]*)(?:\.[0-9]*)?")


def format_usdc(base_units: int, *, fixed: bool = False) -> str:
    """Base units as a USDC decimal: without trailing zeros, or with all six decimals
    (``fixed``) where amounts are read as a column, as in a spreadsheet.

    Integer arithmetic, so no amount is rounded however many digits it has.
    """
    sign = "-" if base_units < 0 else ""
    whole, fraction = divmod(abs(base_units), USDC_BASE_UNITS)
    text = f"{sign}{whole}.{fraction:0{USDC_DECIMALS}d}"
    return text if fixed else text.rstrip("0").rstrip(".")


def base_units_of(amount: Decimal) -> int:
    """A USDC decimal as base units; ``ValueError`` when negative, not finite, finer than a
    base unit (rounding would pay a different amount from the one written) or beyond uint256."""
    return _exact_base_units(amount, str(amount))


def base_units_at_most(amount: Decimal) -> int:
    """The whole base units within a USDC decimal, finer digits dropped: for a limit (a maximum
    price), where ``0.0000019`` allows 1 base unit and never 2. ``ValueError`` when negative,
    not finite or beyond uint256."""
    return int(_scaled(amount, str(amount)))  # int() drops the fraction


def parse_usdc(text: str | int | Decimal) -> int:
    """USDC written as a decimal (``"0.05"``, ``2``) to base units; ``ValueError`` otherwise."""
    try:
        amount = Decimal(str(text).strip())
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a USDC amount") from None
    return _exact_base_units(amount, text)


def parse_typed_usdc(text: str) -> int:
    """USDC a person typed in a form (``"1.5"``, ``"1,000.25"``) to base units; ``ValueError``
    for anything else, with what to type instead.

    >>> parse_typed_usdc(" 1,000.5 "), parse_typed_usdc(".5")
    (1000500000, 500000)
    >>> parse_typed_usdc("0,5")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: '0,5' is not a USDC amount: use a dot for decimals (1.5) and commas only ...
    """
    written = text.strip()
    if not _TYPED.fullmatch(written) or not any(c.isdigit() for c in written):
        raise ValueError(
            f"{written[:40]!r} is not a USDC amount: use a dot for decimals (1.5) and commas "
            "only between groups of three digits (1,000)"
        )
    return _exact_base_units(Decimal(written.replace(",", "")), written[:40])


_NOT_USDC = "not a USDC amount (at most 6 decimals, not negative)"


def _exact_base_units(amount: Decimal, written: object) -> int:
    units = _scaled(amount, written)
    if units != units.to_integral_value():
        raise ValueError(f"{written!r} is {_NOT_USDC}")
    return int(units)


def _scaled(amount: Decimal, written: object) -> Decimal:
    """``amount`` in base units, exactly (a fraction stays)."""
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{written!r} is {_NOT_USDC}")
    # Checked before scaling: int() of a huge exponent would build a number of that many digits.
    if amount and amount.adjusted() + USDC_DECIMALS >= _UINT256_DIGITS:
        raise ValueError(f"{written!r} is too large")
    with localcontext() as context:
        # Exact: the default 28 digits would round a long amount to a whole number of units.
        context.prec = len(amount.as_tuple().digits) + USDC_DECIMALS + 1
        return amount.scaleb(USDC_DECIMALS)
