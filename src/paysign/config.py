"""Settings: one object, read from ``PAYSIGN_*`` environment variables, passed down explicitly.

Every public address derives from ``host``/``port`` unless set on its own, so that
``paysign serve --port 9000`` moves every surface together:

    >>> s = Settings(host="127.0.0.1", port=9000)
    >>> s.resolved_base_url, s.resolved_mcp_url
    ('http://127.0.0.1:9000', 'http://127.0.0.1:9000/mcp')
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA
from paysign.protocol.payment_required import DEFAULT_USDC, DEFAULT_USDC_DOMAIN

# The embedded default plays Base Sepolia with a local token; mainnet is always Circle's USDC.
BASE_MAINNET_USDC = DEFAULT_USDC[BASE_MAINNET.caip2]
BASE_SEPOLIA_USDC = DEFAULT_USDC[BASE_SEPOLIA.caip2]
_MAINNET_NAME, _USDC_VERSION = DEFAULT_USDC_DOMAIN[BASE_MAINNET.caip2]
_TESTNET_NAME, _ = DEFAULT_USDC_DOMAIN[BASE_SEPOLIA.caip2]
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAYSIGN_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8402
    #: Peers (IPs or CIDRs, comma-separated) whose X-Forwarded-For / X-Forwarded-Proto name the
    #: client. None by default: any client could otherwise claim any address and dodge the
    #: per-address sign-in and sign-up limits.
    trusted_proxies: str = ""

    base_url: str | None = None
    catalog_url: str | None = None
    catalog_file_url: str | None = None
    mcp_url: str | None = None
    auth_url: str | None = None
    problem_base: str | None = None

    data_dir: Path = Path("var")
    database_url: str | None = None
    #: Base64 (url-safe) 32-byte key-encryption key. Without it a 0600 file in data_dir is used.
    master_key: str | None = Field(default=None, repr=False)
    previous_master_keys: str | None = Field(default=None, repr=False)
    #: The master key inside a PKCS#11 token instead (it never leaves it):
    #: ``module=/usr/lib/softhsm/libsofthsm2.so,token=LABEL,key=LABEL,pin_file=PATH``.
    master_key_pkcs11: str | None = None
    #: A PKCS#11 master key being rotated away from (same form), opened as a previous key.
    previous_master_key_pkcs11: str | None = None

    #: USDC contract per network; the EIP-712 domain name/version the token really uses.
    usdc_mainnet: str = BASE_MAINNET_USDC
    usdc_mainnet_name: str = _MAINNET_NAME
    usdc_testnet: str = BASE_SEPOLIA_USDC
    usdc_testnet_name: str = _TESTNET_NAME
    usdc_version: str = _USDC_VERSION

    #: JSON-RPC endpoints used to reconcile signed spend with the chain. A network without one
    #: is never reconciled: its signed spend stays counted (fail toward under-spending).
    mainnet_rpc_url: str | None = None
    testnet_rpc_url: str | None = None
    reconcile_interval_seconds: int = 60
    #: Wait this long past validBefore before asking the chain (clock skew, block lag).
    reconcile_grace_seconds: int = 120
    #: A periodic job runs in one process of the cluster, the holder of its lease: renewed
    #: every third of this, taken over by another process this long after its holder died.
    job_lease_seconds: int = Field(default=30, ge=3)

    #: Connections per server process (``paysign serve --workers N`` opens N times these):
    #: the SQLAlchemy engine's pool (plus half as many overflow) and the signing store's pool.
    database_pool_size: int = Field(default=8, ge=1)
    signing_connections: int = Field(default=8, ge=1)
    #: PostgreSQL is reached through a pooler in transaction mode (PgBouncer's
    #: ``pool_mode = transaction``): a server connection serves one transaction of a client, then
    #: another client's, so nothing may outlive a transaction on it. paysign then prepares no
    #: statement on the server (psycopg would after five runs of one).
    database_transaction_pooler: bool = False

    #: Sandbox chain. Unset testnet_rpc_url: ``serve`` runs a local anvil dev chain (chain id
    #: 84532, state under data_dir) with a test USDC. Set it (the real Base Sepolia in
    #: production) together with the treasury key, and nothing is started.
    testnet_treasury_key: str | None = Field(default=None, repr=False)
    #: The key that submits (and pays gas for) holders' withdrawals on Base mainnet, through
    #: ``mainnet_rpc_url``; unset, mainnet withdrawals are refused.
    mainnet_relayer_key: str | None = Field(default=None, repr=False)
    devchain_port: int = 0  # 0: a free port chosen at start
    devchain_dump_interval_seconds: float = 5.0
    test_funds_amount: int = 10_000_000  # 10 test USDC per grant

    #: How listings are paid (the catalog's paymentDetails / sandboxPaymentDetails). Unset, the
    #: catalog names no payment details (``paysign demo`` sets a demo address).
    catalog_pay_to: str | None = None
    catalog_max_timeout_seconds: int = 60
    #: Where ``paysign demo`` serves the demo sellers; the demo catalog seeded on first start
    #: points its listings there.
    demo_sellers_url: str = "http://127.0.0.1:8403"

    # The connector (MCP) and the Bazaar.
    #: Let the connector call sellers on private, loopback and link-local addresses (tests and
    #: ``paysign demo`` set it; never in production).
    connector_allow_private: bool = False
    connector_max_response_bytes: int = 1024 * 1024
    connector_timeout_seconds: float = 20.0
    connector_max_redirects: int = 3
    #: How often the connector checks the catalog version to send tools/list_changed.
    connector_catalog_poll_seconds: float = 2.0
    #: Extra Host / Origin values the connector accepts (comma-separated), beyond those of
    #: mcp_url and base_url and loopback (DNS-rebinding protection).
    connector_allowed_hosts: str = ""
    connector_allowed_origins: str = ""
    #: Serve handshake-era MCP clients without sessions: each request stands alone, so any
    #: process can answer it (no ``Mcp-Session-Id``, no GET stream, no list_changed for them).
    #: ``paysign serve --workers N`` sets it for its workers unless it is set.
    connector_stateless: bool = False
    #: MCP sessions one credential may hold open in one process (for an account); opening one
    #: more closes its least recently used session (``connector/sessions.py``).
    connector_max_sessions_per_principal: int = Field(default=10, ge=1)
    #: The x402 Bazaar discovery index (``/discovery/search``, ``/discovery/resources``).
    bazaar_url: str = "https://api.cdp.coinbase.com/platform/v2/x402"

    # The OAuth authorization server at auth_url.
    #: Lifetimes in seconds. Codes live at most 60 s; access tokens are short-lived and
    #: refreshed with rotating refresh tokens.
    oauth_code_ttl_seconds: int = Field(default=60, ge=1, le=60)
    oauth_access_token_ttl_seconds: int = 900
    oauth_refresh_token_ttl_seconds: int = 30 * 24 * 3600
    #: A refresh retried this soon after it succeeded (the client lost the answer) gets the
    #: same new pair; later, presenting the rotated token revokes the grant.
    oauth_refresh_retry_grace_seconds: int = Field(default=30, ge=0, le=300)
    #: How long the sign-in and consent pages of one authorization request stay valid.
    oauth_sign_in_ttl_seconds: int = 600
    #: Failed sign-ins allowed per account (email) and per client address in one window.
    oauth_max_failures_per_account: int = 5
    oauth_max_failures_per_address: int = 20
    oauth_failure_window_seconds: int = 900

    # The web portal at {base_url}/portal.
    #: A session ends after this long without a request (idle) and this long after sign-in
    #: (absolute). Failed sign-ins share the oauth_* limits above: one budget per account.
    portal_session_idle_seconds: int = Field(default=30 * 60, ge=60)
    portal_session_absolute_seconds: int = Field(default=12 * 3600, ge=300)
    #: Accounts that one client address may ask for in one oauth_failure_window_seconds.
    portal_max_sign_ups_per_address: int = Field(default=10, ge=1)

    #: Sign concurrent payments in a child process (``custody.signer_process``), beside the
    #: event loop's core; false signs every payment on the event loop.
    signer_process: bool = True
    max_body_bytes: int = 64 * 1024
    #: The least severe log events written: debug, info (one line per request), warning,
    #: error or critical.
    log_level: str = "info"
    #: Bearer token ``/metrics`` requires, from any client; unset, only a loopback client with
    #: no proxy header is answered (docs/metrics.md). A secret: never logged.
    metrics_token: str | None = Field(default=None, repr=False)

    # Notifications (webhooks and email) of refusals the holder must act on.
    #: How often the background job sends what is due (seconds).
    notification_interval_seconds: float = Field(default=2.0, gt=0)
    #: Email through SMTP: ``smtp://[user:password@]host[:port]`` (STARTTLS when offered) or
    #: ``smtps://...``; unset, holders cannot add email addresses. Holds a password: never logged.
    smtp_url: str | None = Field(default=None, repr=False)
    smtp_from: str = "paysign@localhost"

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: str) -> str:
        networks = []
        for entry in (part.strip() for part in value.split(",")):
            if not entry:
                continue
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"PAYSIGN_TRUSTED_PROXIES: {entry!r} is not an IP address or network "
                    "(e.g. 10.0.0.5 or 10.0.0.0/24)"
                ) from None
            single = network.num_addresses == 1 and "/" not in entry
            networks.append(str(network.network_address) if single else str(network))
        return ",".join(networks)

    @field_validator("master_key", "master_key_pkcs11", "previous_master_key_pkcs11")
    @classmethod
    def _blank_key_is_unset(cls, value: str | None) -> str | None:
        # As for every other PAYSIGN_* setting, `NAME=` in an environment file means unset:
        # here, the key file in data_dir (or no token) rather than a key of 0 bytes.
        return value if value is None or value.strip() else None

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        level = value.strip().lower()
        if level not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return level

    @property
    def trusted_proxy_list(self) -> list[str]:
        return [entry for entry in self.trusted_proxies.split(",") if entry]

    def uvicorn_proxy_options(self) -> dict[str, Any]:
        """What every uvicorn we start is told about proxies: always both options, so neither
        uvicorn's defaults (trust loopback) nor its FORWARDED_ALLOW_IPS variable decide."""
        trusted = self.trusted_proxy_list
        return {"proxy_headers": bool(trusted), "forwarded_allow_ips": trusted}

    @classmethod
    def listening_on(cls, host: str | None, port: int | None) -> Settings:
        """The environment's settings, with ``--host``/``--port`` when given."""
        overrides: dict[str, object] = {}
        if host is not None:
            overrides["host"] = host
        if port is not None:
            overrides["port"] = port
        return cls(**overrides)  # type: ignore[arg-type]

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def resolved_base_url(self) -> str:
        return (self.base_url or self.origin).rstrip("/")

    @property
    def resolved_catalog_url(self) -> str:
        return (self.catalog_url or self.origin).rstrip("/")

    @property
    def resolved_catalog_file_url(self) -> str:
        return self.catalog_file_url or f"{self.origin}/catalog/full.json"

    @property
    def resolved_mcp_url(self) -> str:
        return (self.mcp_url or f"{self.origin}/mcp").rstrip("/")

    @property
    def resolved_auth_url(self) -> str:
        return (self.auth_url or f"{self.origin}/oauth").rstrip("/")

    @property
    def resolved_problem_base(self) -> str:
        return (self.problem_base or f"{self.origin}/problems").rstrip("/")

    @property
    def rpc_urls(self) -> dict[str, str]:
        urls = {"eip155:8453": self.mainnet_rpc_url, "eip155:84532": self.testnet_rpc_url}
        return {network: url for network, url in urls.items() if url}

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'paysign.db').resolve()}"
