"""``paysign check``: the configuration read and everything it names reached, one line per item.

Nothing is created or changed: a SQLite file or a master-key file that does not exist yet is
reported, not made. No line carries a secret: database URLs are shown without user, password
or query, RPC URLs (whose paths often hold a provider's API key) as scheme and host only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

import sqlalchemy as sa

from paysign.config import Settings
from paysign.custody import MASTER_KEY_FILENAME, KeyVault, SealedSecret, SecretUnreadable
from paysign.services.accounts import wallet_context
from paysign.services.durability import DatabaseDurability, database_durability
from paysign.services.oauth_redirects import is_loopback_host
from paysign.store import catalog_repo
from paysign.store.database import Database
from paysign.store.schema_status import SchemaStatus, schema_status, sealed_wallet_key

MAINNET = "eip155:8453"
TESTNET = "eip155:84532"
_CHAIN_IDS = {MAINNET: 8453, TESTNET: 84532}

#: What a mainnet RPC endpoint is for: said by ``paysign check`` and the README alike.
MAINNET_RPC_NEEDED_FOR = (
    "releasing the live spend of signatures that expired unused (the reconciler asks the chain "
    "whether each was used; without it that spend stays counted against the caps), and the "
    "wallets' balances on Base in the holders' overview"
)


class Verdict(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class CheckLine:
    item: str
    verdict: Verdict
    detail: str

    def render(self) -> str:
        return f"{self.verdict.value:<4} {self.item}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Probes:
    """How the check reaches things, given by the wiring."""

    #: The configured database; None when it is a SQLite file that does not exist yet.
    database: Callable[[], Database | None]
    #: The vault the service would start with, never creating a key: None when no key is
    #: configured and the key file does not exist yet; ``ValueError`` when a key is unusable.
    vault: Callable[[], KeyVault | None]
    #: The chain id an RPC endpoint answers ``eth_chainId`` with (raises when unreachable).
    chain_id: Callable[[str], int]


def check_configuration(settings: Settings, probes: Probes) -> list[CheckLine]:
    lines = [_log_level(settings)]
    lines += _database_and_keys(settings, probes)
    lines += [_rpc(settings, network, probes) for network in (MAINNET, TESTNET)]
    lines += _public_urls(settings)
    return lines


def failed(lines: list[CheckLine]) -> bool:
    return any(line.verdict is Verdict.FAIL for line in lines)


def _log_level(settings: Settings) -> CheckLine:
    return CheckLine("log level", Verdict.OK, f"{settings.log_level} (PAYSIGN_LOG_LEVEL)")


def database_description(url: str) -> str:
    """The database a URL names, without credentials or options."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"sqlite at {parsed.database or ':memory:'}"
    where = f"{parsed.host or 'localhost'}:{parsed.port or 5432}"
    return f"{parsed.get_backend_name()} at {where}/{parsed.database or ''}"


def _first_line(exc: BaseException, settings: Settings) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    message = text[0] if text else type(exc).__name__
    password = sa.engine.make_url(settings.resolved_database_url).password
    if password:
        message = message.replace(str(password), "***")
    return message


def _database_and_keys(settings: Settings, probes: Probes) -> list[CheckLine]:
    described = database_description(settings.resolved_database_url)
    try:
        db = probes.database()
    except Exception as exc:  # a malformed URL, a missing driver: said, not raised
        return [CheckLine("database", Verdict.FAIL, f"{described}: {_first_line(exc, settings)}")]
    if db is None:
        return [
            CheckLine(
                "database",
                Verdict.WARN,
                f"{described} does not exist yet (paysign migrate or the first start creates it)",
            ),
            _master_key(settings, probes, None),
        ]
    try:
        with db.read() as conn:
            status = schema_status(conn)
            stored = sealed_wallet_key(conn) if status.current is not None else None
            listings = len(catalog_repo.all_listings(conn)) if status.current is not None else 0
        durability = database_durability(db)
    except Exception as exc:  # unreachable, refused, wrong password: the check's answer
        return [CheckLine("database", Verdict.FAIL, f"{described}: {_first_line(exc, settings)}")]
    finally:
        db.dispose()
    lines = [_schema_line(described, status)]
    if durability is not None:
        lines.append(durability_line(durability))
    return [*lines, _master_key(settings, probes, stored), _catalog_line(settings, listings)]


def durability_line(durability: DatabaseDurability) -> CheckLine:
    """FAIL when a crash could take back answered signatures; warn for what only some
    hardware makes safe."""
    item = "database durability"
    if durability.losses:
        why = "; ".join(durability.losses)
        return CheckLine(item, Verdict.FAIL, f"{why} (docs/deploy.md, Durability)")
    if durability.cautions:
        return CheckLine(item, Verdict.WARN, "; ".join(durability.cautions))
    return CheckLine(item, Verdict.OK, durability.describe())


def _schema_line(described: str, status: SchemaStatus) -> CheckLine:
    if not status.known:
        return CheckLine(
            "database",
            Verdict.FAIL,
            f"{described} is at schema {status.current}, which this paysign does not know "
            f"(newest here: {status.head}): it was migrated by a newer version "
            "(docs/deploy.md, rolling back)",
        )
    if status.pending:
        return CheckLine(
            "database",
            Verdict.OK,
            f"{described} reachable, schema {status.current or 'empty'}; "
            f"{len(status.pending)} migration(s) to apply (paysign migrate, or at start)",
        )
    return CheckLine("database", Verdict.OK, f"{described} reachable, schema {status.head}")


def _master_key(settings: Settings, probes: Probes, stored: tuple[str, bytes] | None) -> CheckLine:
    key_file = settings.data_dir / MASTER_KEY_FILENAME
    try:
        vault = probes.vault()
    except ValueError as exc:  # InvalidMasterKey: the message names the source, never a value
        return CheckLine("master key", Verdict.FAIL, str(exc))
    if vault is None:
        if stored is not None:
            return CheckLine(
                "master key",
                Verdict.FAIL,
                f"{key_file} is missing and the database holds wallet keys sealed under a "
                "master key: restore the key file (or set PAYSIGN_MASTER_KEY); a new key "
                "would open none of them",
            )
        return CheckLine(
            "master key",
            Verdict.WARN,
            f"none yet: the first start creates {key_file}; keep a copy apart from the "
            "database's backups",
        )
    if settings.master_key is not None:
        source = "PAYSIGN_MASTER_KEY"
    elif key_file.exists():
        source = str(key_file)
    else:
        source = "the configured master key"
    if stored is None:
        return CheckLine("master key", Verdict.OK, f"{source} is readable; no wallet key yet")
    wallet_id, sealed = stored
    try:
        vault.open(wallet_context(wallet_id), SealedSecret.from_bytes(sealed))
    except SecretUnreadable:
        return CheckLine(
            "master key",
            Verdict.FAIL,
            f"{source} does not open the stored wallet keys: it is not the key they were "
            "sealed under (a key from another installation, or a rotation missing "
            "PAYSIGN_PREVIOUS_MASTER_KEYS)",
        )
    return CheckLine("master key", Verdict.OK, f"{source} opens a stored wallet key")


def _catalog_line(settings: Settings, listings: int) -> CheckLine:
    if listings and not settings.catalog_pay_to:
        return CheckLine(
            "catalog",
            Verdict.WARN,
            f"{listings} listing(s), but PAYSIGN_CATALOG_PAY_TO is unset: the catalog names "
            "no payment details",
        )
    if not listings:
        return CheckLine(
            "catalog", Verdict.OK, "empty (paysign catalog import FILE publishes listings)"
        )
    return CheckLine(
        "catalog", Verdict.OK, f"{listings} listing(s), paid to {settings.catalog_pay_to}"
    )


def rpc_origin(url: str) -> str:
    """An RPC URL as scheme and host: its path and query often carry a provider's API key."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def _rpc(settings: Settings, network: str, probes: Probes) -> CheckLine:
    item = "mainnet RPC" if network == MAINNET else "testnet RPC"
    url = settings.rpc_urls.get(network)
    if url is None:
        if network == MAINNET:
            return CheckLine(
                item,
                Verdict.WARN,
                f"PAYSIGN_MAINNET_RPC_URL is unset; it is needed for {MAINNET_RPC_NEEDED_FOR}",
            )
        return CheckLine(
            item,
            Verdict.OK,
            "PAYSIGN_TESTNET_RPC_URL is unset: paysign serve runs a local dev chain (anvil) "
            "for the sandbox",
        )
    where = rpc_origin(url)
    try:
        chain_id = probes.chain_id(url)
    except Exception as exc:  # unreachable or not JSON-RPC: the check's answer
        return CheckLine(item, Verdict.FAIL, f"{where} does not answer ({type(exc).__name__})")
    expected = _CHAIN_IDS[network]
    if chain_id != expected:
        return CheckLine(
            item, Verdict.FAIL, f"{where} is chain {chain_id}, not {expected} ({network})"
        )
    if network == TESTNET and not settings.testnet_treasury_key:
        return CheckLine(
            item,
            Verdict.WARN,
            f"{where} reachable (chain {chain_id}); PAYSIGN_TESTNET_TREASURY_KEY is unset, so "
            "no test funds can be granted",
        )
    return CheckLine(item, Verdict.OK, f"{where} reachable (chain {chain_id})")


def _public_urls(settings: Settings) -> list[CheckLine]:
    urls = {
        "PAYSIGN_BASE_URL": settings.resolved_base_url,
        "PAYSIGN_CATALOG_URL": settings.resolved_catalog_url,
        "PAYSIGN_CATALOG_FILE_URL": settings.resolved_catalog_file_url,
        "PAYSIGN_MCP_URL": settings.resolved_mcp_url,
        "PAYSIGN_AUTH_URL": settings.resolved_auth_url,
        "PAYSIGN_PROBLEM_BASE": settings.resolved_problem_base,
    }
    lines = [_public_url(name, url) for name, url in urls.items()]
    proxied = any(
        line.verdict is Verdict.OK and url.startswith("https:")
        for line, url in zip(lines, urls.values(), strict=True)
    )
    if proxied and not settings.trusted_proxies:
        lines.append(
            CheckLine(
                "PAYSIGN_TRUSTED_PROXIES",
                Verdict.WARN,
                "unset while the public URLs are https: behind a TLS proxy, every client "
                "would look like the proxy to the per-address sign-in limits",
            )
        )
    return lines


def _public_url(name: str, url: str) -> CheckLine:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return CheckLine(name, Verdict.OK, url)
    if parts.scheme == "http" and is_loopback_host(host):
        return CheckLine(name, Verdict.OK, f"{url} (loopback: reachable from this host only)")
    return CheckLine(
        name,
        Verdict.FAIL,
        f"{url} is not https: API keys and OAuth tokens would cross the network in clear "
        "(put TLS in front, docs/deploy.md, and set the https URL)",
    )
