"""What the demo sellers sell and on which terms.

The listings are the packaged demo catalog (the one ``paysign serve`` seeds), placed at
``settings.demo_sellers_url``; prices are their ``priceUsdc``. Each seller has two endpoints:

- **sandbox** (``X-Sandbox-Mode: true``): Base Sepolia, ``eip155:84532`` (v1 name
  ``base-sepolia``), the sandbox USDC (in the embedded default the dev chain's token at Base
  Sepolia's USDC address), settled by the local facilitator on the sandbox chain;
- **production** (no header): Base mainnet, ``eip155:8453`` (``base``), Circle's USDC ("USD
  Coin"), exactly as the catalog's ``paymentDetails`` publish it. The local facilitator checks
  such a payment (signature, amount, recipient, validity window) but cannot settle it: no chain
  here holds mainnet USDC.

    >>> from paysign.config import Settings
    >>> sandbox = terms_for(Settings(), DemoSettings())["sandbox"]
    >>> sandbox.network, sandbox.v1_network, sandbox.extra, sandbox.settles
    ('eip155:84532', 'base-sepolia', {'name': 'USDC', 'version': '2'}, True)
    >>> [(d.name, d.route_path, d.price, d.x402_version)
    ...  for d in demo_listings("http://127.0.0.1:8403")][:1]
    [('market_quote', '/market/v1/quote/{symbol}', 10000, 2)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from eth_utils.address import to_checksum_address
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from paysign.catalog.listing import Listing, parse_catalog_entries
from paysign.chain.devchain import ANVIL_DEV_KEYS
from paysign.config import Settings
from paysign.services.catalog import demo_catalog

Mode = Literal["sandbox", "production"]
SANDBOX_HEADER = "x-sandbox-mode"
#: The demo catalog's x402 v1 seller; every other listing speaks x402 v2.
V1_LISTINGS = frozenset({"random_fact"})
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_-]+)\}")
#: Whom the demo's sellers are paid, and its catalog's payTo, unless PAYSIGN_CATALOG_PAY_TO or
#: PAYSIGN_DEMO_*_PAY_TO say otherwise. A demo value only: production has no default payee.
DEMO_PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"


class DemoSettings(BaseSettings):
    """``PAYSIGN_DEMO_*``: the facilitator's address and key, and whom the sellers are paid."""

    model_config = SettingsConfigDict(env_prefix="PAYSIGN_DEMO_", extra="ignore")

    facilitator_host: str = "127.0.0.1"
    #: 0: a free port chosen at start.
    facilitator_port: int = 8404
    #: Pays the gas of settlements. anvil's account 1 by default: a public dev key, never the
    #: treasury's (account 0), so the two never race for nonces. Set a funded key of your own
    #: when PAYSIGN_TESTNET_RPC_URL points at a real chain.
    facilitator_key: str = Field(default=ANVIL_DEV_KEYS[1], repr=False)
    #: Whom the sellers are paid; the catalog's payTo (``PAYSIGN_CATALOG_PAY_TO``) by default,
    #: else ``DEMO_PAY_TO``.
    sandbox_pay_to: str | None = None
    live_pay_to: str | None = None
    #: The sellers' maxTimeoutSeconds; the catalog's (``PAYSIGN_CATALOG_MAX_TIMEOUT_SECONDS``)
    #: by default.
    max_timeout_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class Terms:
    """How one endpoint (sandbox or production) of every seller is paid."""

    mode: Mode
    network: str  # CAIP-2, for x402 v2
    v1_network: str  # the legacy name, for x402 v1
    asset: str
    name: str  # the token's EIP-712 domain
    version: str
    pay_to: str
    max_timeout_seconds: int
    #: Whether the local facilitator can settle on this network (else it only verifies).
    settles: bool

    @property
    def extra(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


def terms_for(settings: Settings, demo: DemoSettings) -> dict[Mode, Terms]:
    """Both endpoints' terms. Addresses are EIP-55 checksummed: the SDK's web3 signer refuses
    any other spelling."""
    timeout = demo.max_timeout_seconds or settings.catalog_max_timeout_seconds
    return {
        "sandbox": Terms(
            "sandbox",
            "eip155:84532",
            "base-sepolia",
            settings.usdc_testnet,
            settings.usdc_testnet_name,
            settings.usdc_version,
            to_checksum_address(demo.sandbox_pay_to or settings.catalog_pay_to or DEMO_PAY_TO),
            timeout,
            settles=True,
        ),
        "production": Terms(
            "production",
            "eip155:8453",
            "base",
            settings.usdc_mainnet,
            settings.usdc_mainnet_name,
            settings.usdc_version,
            to_checksum_address(demo.live_pay_to or settings.catalog_pay_to or DEMO_PAY_TO),
            timeout,
            settles=False,
        ),
    }


@dataclass(frozen=True, slots=True)
class DemoListing:
    """One listing of the demo catalog as its seller serves it."""

    listing: Listing
    #: The path the seller serves, placeholders kept: ``/market/v1/quote/{symbol}``.
    route_path: str

    @property
    def name(self) -> str:
        return self.listing.name

    @property
    def method(self) -> str:
        return str(self.listing.document["method"])

    @property
    def description(self) -> str:
        return str(self.listing.document["description"])

    @property
    def price(self) -> int:
        """USDC base units."""
        return self.listing.price_base_units

    @property
    def sandbox_available(self) -> bool:
        return self.listing.sandbox_available

    @property
    def x402_version(self) -> int:
        return 1 if self.name in V1_LISTINGS else 2

    @property
    def x402_route(self) -> str:
        """The SDK middleware's route key: ``GET /market/v1/quote/[symbol]``."""
        path = _PLACEHOLDER.sub(r"[\1]", self.route_path)
        return f"{self.method} {path}"


def demo_listings(sellers_url: str) -> list[DemoListing]:
    """The demo catalog's listings, each with the path its seller serves."""
    entries = demo_catalog(sellers_url)["catalog"]
    found = []
    for listing in parse_catalog_entries(entries):
        base_path = urlsplit(listing.url).path.rstrip("/")
        found.append(DemoListing(listing, base_path + listing.path))
    return found


def sandbox_requested(value: str | None) -> bool:
    """``X-Sandbox-Mode: true`` (any case) asks for the sandbox; anything else is production.

    >>> sandbox_requested("TRUE"), sandbox_requested("false"), sandbox_requested(None)
    (True, False, False)
    """
    return value is not None and value.strip().lower() == "true"
