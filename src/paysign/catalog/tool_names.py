"""The names of the connector's own MCP tools. They live in the catalog, below the connector,
because a listing's name becomes a tool name too and may not take one of these: an assistant's
client refuses a tool list with a name twice, and a listing named like a built-in would pass
for it."""

from __future__ import annotations

PAY_X402 = "pay_x402"
SEARCH_BAZAAR = "search_bazaar"
WALLET_STATUS = "wallet_status"
BUILTIN_TOOL_NAMES = frozenset({PAY_X402, SEARCH_BAZAAR, WALLET_STATUS})
