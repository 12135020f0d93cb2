"""USDC base units ↔ decimal text: the one conversion every door shows amounts with."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paysign.protocol.usdc import (
    USDC_BASE_UNITS,
    base_units_at_most,
    base_units_of,
    format_usdc,
    parse_typed_usdc,
    parse_usdc,
)

AMOUNTS = st.integers(min_value=0, max_value=2**256 - 1)


@pytest.mark.parametrize(
    ("base_units", "short", "fixed"),
    [
        (0, "0", "0.000000"),
        (1, "0.000001", "0.000001"),
        (2_500, "0.0025", "0.002500"),
        (50_000, "0.05", "0.050000"),
        (1_000_000, "1", "1.000000"),
        (1_500_000, "1.5", "1.500000"),
        (10_000_000, "10", "10.000000"),
        (12_340_000, "12.34", "12.340000"),
        (123_456_789, "123.456789", "123.456789"),
    ],
)
def test_amounts_as_text(base_units: int, short: str, fixed: str) -> None:
    assert format_usdc(base_units) == short
    assert format_usdc(base_units, fixed=True) == fixed


@given(st.integers(min_value=0, max_value=10**22))
def test_short_text_is_the_decimal_without_trailing_zeros(base_units: int) -> None:
    # What the portal, the SDK and the connector each printed before sharing this function.
    decimal = Decimal(base_units) / USDC_BASE_UNITS
    assert format_usdc(base_units) == format(decimal.normalize(), "f")
    assert format_usdc(base_units, fixed=True) == f"{decimal:.6f}"


@given(AMOUNTS)
def test_text_reads_back_as_the_same_amount(base_units: int) -> None:
    assert parse_usdc(format_usdc(base_units)) == base_units
    assert parse_usdc(format_usdc(base_units, fixed=True)) == base_units


def test_huge_amounts_are_not_rounded() -> None:
    amount = 2**256 - 1
    whole, fraction = divmod(amount, USDC_BASE_UNITS)
    assert format_usdc(amount) == f"{whole}.{fraction:06d}"
    assert parse_usdc(format_usdc(amount)) == amount


@pytest.mark.parametrize(
    ("written", "base_units"),
    [
        ("0.05", 50_000),
        (" 1 ", 1_000_000),
        ("1.500000", 1_500_000),
        ("1e-6", 1),
        ("0", 0),
        (2, 2_000_000),
        (Decimal("0.000001"), 1),
    ],
)
def test_decimals_as_base_units(written: str | int | Decimal, base_units: int) -> None:
    assert parse_usdc(written) == base_units


@pytest.mark.parametrize(
    "written",
    [
        "-1",
        "0.0000001",
        "1.0000000000000000000000000001",  # rounds to 1 in Decimal's default 28 digits
        "abc",
        "",
        "NaN",
        "Infinity",
        "1e72",
        "1e999999999",
    ],
)
def test_amounts_that_are_not_usdc_are_refused(written: str) -> None:
    with pytest.raises(ValueError, match=r"is not a USDC amount|is too large"):
        parse_usdc(written)


def test_base_units_of_a_decimal() -> None:
    assert base_units_of(Decimal("0.002")) == 2_000
    assert base_units_of(Decimal("10")) == 10_000_000
    for bad in (Decimal("-0.5"), Decimal("0.0000005"), Decimal("Infinity")):
        with pytest.raises(ValueError):
            base_units_of(bad)


@pytest.mark.parametrize(
    ("amount", "base_units"),
    [
        ("0", 0),
        ("0.000001", 1),
        ("0.0000019", 1),
        ("0.0000009", 0),
        ("0.010000", 10_000),
        ("1E+2", 100_000_000),
        ("123456789012345678901234567890.1234569", 123456789012345678901234567890_123456),
    ],
)
def test_a_limit_keeps_the_whole_base_units(amount: str, base_units: int) -> None:
    assert base_units_at_most(Decimal(amount)) == base_units


@given(st.decimals(min_value=0, max_value=10**15, allow_nan=False, places=9))
def test_a_limit_is_what_the_hand_written_conversions_gave(amount: Decimal) -> None:
    # The connector and the SDK each truncated ``amount * 1_000_000`` before sharing this.
    assert base_units_at_most(amount) == int(amount * USDC_BASE_UNITS)


@pytest.mark.parametrize("amount", ["-0.000001", "NaN", "Infinity", "1e72"])
def test_a_limit_that_is_not_usdc_is_refused(amount: str) -> None:
    with pytest.raises(ValueError, match=r"is not a USDC amount|is too large"):
        base_units_at_most(Decimal(amount))


@pytest.mark.parametrize(
    ("typed", "base_units"),
    [
        ("1.5", 1_500_000),
        (" 10 ", 10_000_000),
        ("1,000", 1_000_000_000),
        (".5", 500_000),
        ("12,345.6", 12_345_600_000),
        ("1,234,567", 1_234_567_000_000),
        ("1.", 1_000_000),
    ],
)
def test_a_typed_amount_is_read_as_written(typed: str, base_units: int) -> None:
    assert parse_typed_usdc(typed) == base_units


@pytest.mark.parametrize(
    "typed",
    # A decimal comma was read as a thousands separator: "1,5" saved a cap of 15 USDC, "10,00"
    # one of 1,000; Python's Decimal took underscores, exponents and other scripts' digits.
    [
        "1,5",
        "10,00",
        "0,5",
        "1.000,50",
        "1,0000",
        ",5",
        "1_0",
        "1e3",
        "\uff11\uff12",
        "\u0663",
        "NaN",
        "-1",
        ".",
        ",",
        "",
        "0x10",
        "1 000",
    ],
)
def test_a_typed_amount_in_any_other_form_is_refused_saying_what_to_type(typed: str) -> None:
    with pytest.raises(ValueError, match="use a dot for decimals"):
        parse_typed_usdc(typed)
