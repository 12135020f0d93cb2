"""Shared fixtures and builders (import them with ``from .conftest import ...``): the Base USDC
registry and fresh, valid v2/v1 signature-request bodies to mutate."""

from __future__ import annotations

from typing import Any

import pytest

from paysign.protocol import AssetRegistry

USDC_BASE = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
USDC_BASE_SEPOLIA = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
SELLER_URL = "https://api.example.com/premium-data?city=Berlin"
# A throwaway test key (never funded); the examples in eth-account's documentation use it too.
TEST_KEY = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")


def make_registry() -> AssetRegistry:
    return AssetRegistry.from_addresses(
        mainnet=USDC_BASE,
        mainnet_name="USD Coin",
        testnet=USDC_BASE_SEPOLIA,
        testnet_name="USDC",
        version="2",
    )


@pytest.fixture(scope="session")
def registry() -> AssetRegistry:
    return make_registry()


def v2_accepts(network: str = "eip155:84532", **overrides: Any) -> dict[str, Any]:
    """A v2 ``accepts`` entry, keys in the SDK model's order (scheme … extra)."""
    testnet = network in ("eip155:84532", "base-sepolia")
    entry: dict[str, Any] = {
        "scheme": "exact",
        "network": network,
        "asset": USDC_BASE_SEPOLIA if testnet else USDC_BASE,
        "amount": "10000",
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 60,
        "extra": {"name": "USDC" if testnet else "USD Coin", "version": "2"},
    }
    entry.update(overrides)
    return entry


def v2_body(network: str = "eip155:84532", **overrides: Any) -> dict[str, Any]:
    return {
        "sellerUrl": SELLER_URL,
        "paymentRequired": {
            "x402Version": 2,
            "error": "PAYMENT-SIGNATURE header is required",
            "resource": {
                "url": "https://api.example.com/premium-data",
                "description": "Premium data",
                "mimeType": "application/json",
            },
            "accepts": [v2_accepts(network, **overrides)],
            "extensions": {"bazaar": {"info": {"input": {"type": "http"}}, "schema": {}}},
        },
    }


def v1_body(network: str = "base-sepolia", **overrides: Any) -> dict[str, Any]:
    """A real-shaped v1 402 body: no top-level resource, ``maxAmountRequired``."""
    testnet = network in ("eip155:84532", "base-sepolia")
    entry: dict[str, Any] = {
        "scheme": "exact",
        "network": network,
        "maxAmountRequired": "10000",
        "resource": "https://api.example.com/premium-data",
        "description": "Access to premium market data",
        "mimeType": "application/json",
        "outputSchema": None,
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 60,
        "asset": USDC_BASE_SEPOLIA if testnet else USDC_BASE,
        "extra": {"name": "USDC" if testnet else "USD Coin", "version": "2"},
    }
    entry.update(overrides)
    return {
        "sellerUrl": SELLER_URL,
        "paymentRequired": {
            "x402Version": 1,
            "error": "X-PAYMENT header is required",
            "accepts": [entry],
        },
    }
