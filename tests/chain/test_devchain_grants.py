"""A test-funds grant answered 200 is on the dev chain's disk before the answer: anvil killed
with SIGKILL (no clean stop, no final dump) and started again from the same data directory
still holds the grantee's balance."""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import httpx

from conftest import TEST_MASTER_KEY, FrozenClock, LiveServer, make_database_url
from paysign.app import create_app
from paysign.bootstrap import Runtime, asset_registry
from paysign.chain.devchain import USDC_ADDRESS, Devchain
from paysign.chain.testnet import SandboxChain
from paysign.config import Settings
from paysign.custody import EnvelopeVault
from paysign.protocol import parse_address
from paysign.services import accounts, keys
from paysign.store.database import Database
from paysign.store.migrate import migrate


def grant_test_funds(devchain: Devchain, data_dir: Path, tmp_path: Path) -> tuple[str, int]:
    """``POST /wallets/testnet/funds`` on a server wired as ``paysign serve`` wires it to its
    dev chain; the wallet funded and the amount."""
    url = next(make_database_url("sqlite", tmp_path))
    settings = devchain.settings_for(Settings(data_dir=data_dir, database_url=url))
    chain = SandboxChain.from_settings(settings)
    assert chain is not None and chain.state_file == devchain.state_file
    db = Database(url)
    migrate(db)
    runtime = Runtime(
        settings,
        db,
        EnvelopeVault(TEST_MASTER_KEY),
        FrozenClock(),
        asset_registry(settings),
        sandbox_chain=chain,
    )
    email = f"agent-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        db, runtime.vault, runtime.clock, email=email, password="correct horse battery"
    )
    api_key = keys.issue_key(db, runtime.clock, email=email, expires_in_days=30).api_key
    try:
        with LiveServer(create_app(runtime)) as server:
            granted = httpx.post(
                f"{server.url}/wallets/testnet/funds",
                headers={"Authorization": f"Bearer {api_key}"},
                timeout=30,
            )
        assert granted.status_code == 200, granted.text
    finally:
        chain.close()
        db.dispose()
    return created.wallet_address, settings.test_funds_amount


def test_a_grant_survives_anvil_killed(tmp_path: Path) -> None:
    data_dir = tmp_path / "var"
    # No periodic dump during the test: only the save after the grant can keep it.
    devchain = Devchain(data_dir, dump_interval=3600).start()
    try:
        wallet, amount = grant_test_funds(devchain, data_dir, tmp_path)
        anvil = devchain._anvil
        assert anvil is not None
        os.kill(devchain.pid, signal.SIGKILL)
        anvil.process.wait(timeout=10)
    finally:
        devchain.stop()  # anvil is dead: no final dump

    with Devchain(data_dir, dump_interval=3600) as restarted:
        chain = SandboxChain(restarted.rpc_url, usdc=USDC_ADDRESS, treasury_key=None)
        try:
            assert chain.usdc_balance(parse_address(wallet)) == amount
        finally:
            chain.close()


def test_other_chains_are_not_saved(tmp_path: Path) -> None:
    """An RPC endpoint that is not this data directory's running dev chain gets no saves."""
    settings = Settings(data_dir=tmp_path / "var", testnet_rpc_url="http://127.0.0.1:9")
    chain = SandboxChain.from_settings(settings)
    assert chain is not None and chain.state_file is None
    chain.close()
