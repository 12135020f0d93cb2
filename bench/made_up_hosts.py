"""The vocabulary of made-up seller hosts, shared by the big policy and the big ledger."""

from __future__ import annotations

WORDS = [
    "data",
    "quote",
    "weather",
    "search",
    "maps",
    "llm",
    "news",
    "price",
    "feed",
    "geo",
    "ocr",
    "tts",
    "img",
    "vec",
    "chain",
    "sport",
    "fx",
    "stock",
    "law",
    "med",
]
TLDS = ["com", "io", "ai", "net", "dev", "org", "co", "app", "xyz", "cloud"]
SUBDOMAINS = ["api", "", "data", "v2-api", "edge", "gw", "eu.api", "us.api"]
