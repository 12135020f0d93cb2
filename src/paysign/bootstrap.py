"""Wiring: from Settings to the live dependencies every entry point shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from paysign.chain.balances import LiveUsdc
from paysign.chain.relay import MainnetRelay
from paysign.chain.testnet import SandboxChain
from paysign.clock import Clock, SystemClock
from paysign.config import Settings
from paysign.custody import KeyVault
from paysign.datadir import secure_data_dir
from paysign.errors import SchemaFromNewerVersion
from paysign.protocol import AssetRegistry
from paysign.services.key_custody import open_vault
from paysign.services.migrations import migration_status, refuse_newer
from paysign.store.database import Database
from paysign.store.migrate import migrate


@dataclass(frozen=True, slots=True)
class Runtime:
    settings: Settings
    db: Database
    vault: KeyVault
    clock: Clock
    registry: AssetRegistry
    #: The sandbox network (eip155:84532): RPC, its USDC, the treasury. None when
    #: settings.testnet_rpc_url is unset (``paysign serve`` sets it to its dev chain's URL).
    sandbox_chain: SandboxChain | None = None
    #: Base mainnet with the relayer that submits withdrawals; None unless
    #: settings.mainnet_rpc_url and settings.mainnet_relayer_key are both set.
    mainnet_relay: MainnetRelay | None = None
    #: The wallet's USDC on Base for the holder's overview; None unless
    #: settings.mainnet_rpc_url is set.
    live_usdc: LiveUsdc | None = None


def asset_registry(settings: Settings) -> AssetRegistry:
    return AssetRegistry.from_addresses(
        mainnet=settings.usdc_mainnet,
        mainnet_name=settings.usdc_mainnet_name,
        testnet=settings.usdc_testnet,
        testnet_name=settings.usdc_testnet_name,
        version=settings.usdc_version,
    )


def prepare_data_dir(settings: Settings) -> None:
    """Make the data directory private (creating it when something will be kept in it); raises
    ``DataDirExposed`` when it cannot be made private."""
    needed = settings.database_url is None or settings.master_key is None
    if needed or settings.data_dir.exists():
        secure_data_dir(settings.data_dir)


def open_database(settings: Settings, *, migrated: bool = True) -> Database:
    """The configured database (created when it is a SQLite file not there yet), migrated to
    the newest schema unless ``migrated`` is False."""
    prepare_data_dir(settings)
    db = Database(
        settings.resolved_database_url,
        pool_size=settings.database_pool_size,
        server_prepared_statements=not settings.database_transaction_pooler,
    )
    if migrated:
        try:
            # A schema a newer paysign wrote is not this version's to touch: said plainly.
            refuse_newer(migration_status(db))
        except SchemaFromNewerVersion:
            db.dispose()
            raise
        migrate(db)
    return db


def existing_database(settings: Settings) -> Database | None:
    """The configured database as it is, neither created nor migrated: None when it is a
    SQLite file that does not exist yet."""
    url = settings.resolved_database_url
    if sa.engine.make_url(url).get_backend_name() == "sqlite":
        name = sa.engine.make_url(url).database
        if name and name != ":memory:" and not Path(name).exists():
            return None
    return Database(
        url,
        pool_size=1,
        server_prepared_statements=not settings.database_transaction_pooler,
    )


def build_runtime(
    settings: Settings, *, clock: Clock | None = None, key_only_for_new_database: bool = False
) -> Runtime:
    """Open the database (migrating it to the newest schema) and the key vault.

    ``key_only_for_new_database``: a missing master key file is created only when the database
    did not exist (or had no schema) before: an operator command on a database the service
    already uses must not make a second key (see ``open_vault``)."""
    may_create_key = True
    if key_only_for_new_database:
        prepare_data_dir(settings)  # another user's data directory is refused before it is read
        may_create_key = _holds_no_schema(settings)
    db = open_database(settings)
    # Fails closed (InvalidMasterKey, saying what to do) unless the key opens what is stored.
    vault = open_vault(settings, db, may_create_key=may_create_key)
    return Runtime(
        settings,
        db,
        vault,
        clock or SystemClock(),
        asset_registry(settings),
        sandbox_chain=SandboxChain.from_settings(settings),
        mainnet_relay=MainnetRelay.from_settings(settings),
        live_usdc=LiveUsdc.from_settings(settings),
    )


def _holds_no_schema(settings: Settings) -> bool:
    """True when the configured database is missing or was never migrated."""
    db = existing_database(settings)
    if db is None:
        return True
    try:
        return migration_status(db).current is None
    finally:
        db.dispose()
