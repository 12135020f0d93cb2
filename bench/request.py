"""What every measurement sends: the seller's 402 answer, the signing request, and where."""

from __future__ import annotations

import json
from typing import Any

HOST = "127.0.0.1"
PATH = "/wallets/signatures"

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
            "network": "eip155:84532",
            "amount": "10000",
            "asset": USDC_SEPOLIA,
            "payTo": PAY_TO,
            "maxTimeoutSeconds": 60,
            "extra": {"name": "USDC", "version": "2"},
        }
    ],
}
REQUEST_BODY: dict[str, Any] = {
    "sellerUrl": "https://api.example.com/weather?city=paris",
    "paymentRequired": PAYMENT_REQUIRED,
}


def request_body_bytes() -> bytes:
    return json.dumps(REQUEST_BODY, separators=(",", ":")).encode()
