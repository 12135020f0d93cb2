"""USDC the agent writes (a tool's maximum) and the Bazaar's prices, through protocol/usdc.py."""

from __future__ import annotations

from typing import Any

import pytest

from paysign.connector.bazaar import normalise_item
from paysign.connector.builtin_tools import usdc_amount
from paysign.connector.payment import ToolFailure


@pytest.mark.parametrize(
    ("written", "base_units"),
    [
        (None, None),
        (0, 0),
        ("0", 0),
        (0.000001, 1),
        ("0.0000019", 1),  # a maximum never allows more than was written
        (0.01, 10_000),
        ("0.010000", 10_000),
        (2, 2_000_000),
        (1e-06, 1),
        ("12345678901234567890.123456", 12345678901234567890_123456),
    ],
)
def test_a_maximum_in_usdc_as_base_units(written: Any, base_units: int | None) -> None:
    assert usdc_amount("maxAmountUsdc", written) == base_units


@pytest.mark.parametrize("written", [True, False, -0.01, "abc", "", "NaN", "Infinity", [], "1e80"])
def test_a_maximum_that_is_not_usdc_is_refused(written: Any) -> None:
    with pytest.raises(ToolFailure, match="maxAmountUsdc must be a non-negative number of USDC"):
        usdc_amount("maxAmountUsdc", written)


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        ("0", "0"),
        ("1", "0.000001"),
        ("2500", "0.0025"),
        ("10000", "0.01"),
        ("1000000", "1"),
        ("12340000", "12.34"),
        (str(2**256 - 1), f"{(2**256 - 1) // 10**6}.{(2**256 - 1) % 10**6:06d}"),
    ],
)
def test_bazaar_prices_are_shown_in_usdc(amount: str, shown: str) -> None:
    item = normalise_item(
        {"url": "https://a.example/x", "accepts": [{"network": "base", "amount": amount}]}
    )
    assert item is not None
    assert item["priceUsdc"] == item["accepts"][0]["amountUsdc"] == shown
    assert item["accepts"][0]["amount"] == amount
