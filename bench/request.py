"""What every measurement sends: the seller's 402 answer, the signing request, and where."""

from __future__ import annotations

import json
from typing import Any

HOST = "127.0.0.1"
PATH = "/wallets/signatures"

# Live payments: Base mainnet terms and no X-Sandbox-Mode header, so that the caps are checked
# and reserved on every request.
NETWORK = "eip155:8453"
CHAIN_ID = 8453
USDC_BASE = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
USDC_NAME = "USD Coin"
USDC_VERSION = "2"
#: The testnet token, for the big ledger's rows on the other network.
USDC_SEPOLIA = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
PAYMENT_REQUIRED: dict[str, Any] = {
    "x402Version": 2,
    "resource": {
        "url": "https://api.example.com/weather",
        "description": "weather",
        "mimeType": "application/json",
    },
    "accepts": [
        {
            "scheme": "exact",
            "network": NETWORK,
            "amount": "10000",
            "asset": USDC_BASE,
            "payTo": PAY_TO,
            "maxTimeoutSeconds": 60,
            "extra": {"name": USDC_NAME, "version": USDC_VERSION},
        }
    ],
}
REQUEST_BODY: dict[str, Any] = {
    "sellerUrl": "https://api.example.com/weather?city=paris",
    "paymentRequired": PAYMENT_REQUIRED,
}


def request_body_bytes() -> bytes:
    return json.dumps(REQUEST_BODY, separators=(",", ":")).encode()
