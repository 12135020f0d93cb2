"""``paysign serve`` (one process) stops as cleanly on SIGTERM (systemd's stop) as on Ctrl-C:
requests drained, the dev chain's state saved, exit status 0."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from conftest import ok_json, paysign
from paysign.chain.devchain import USDC_ADDRESS
from paysign.chain.devchain_files import running_devchain
from paysign.chain.rpc import JsonRpc
from serving_support import Serve

pytestmark = pytest.mark.slow


@pytest.fixture
def sqlite_env(tmp_path: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    environment["PAYSIGN_DATA_DIR"] = str(tmp_path / "var")
    # No periodic save in the test's time: only the stop can have written the grant.
    environment["PAYSIGN_DEVCHAIN_DUMP_INTERVAL_SECONDS"] = "3600"
    return environment


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_saves_the_dev_chain_and_exits_0(
    sqlite_env: dict[str, str], tmp_path: Path, sig: signal.Signals
) -> None:
    email = "funds@example.com"
    created = ok_json(
        paysign(
            sqlite_env, "admin", "create-account", "--email", email, "--password", "pass phrase 1"
        )
    )
    key = ok_json(paysign(sqlite_env, "admin", "issue-key", "--email", email))["apiKey"]
    wallet = bytes.fromhex(created["walletAddress"][2:])
    state = tmp_path / "var" / "devchain" / "state.json"

    server = Serve(sqlite_env)
    with server as url:
        granted = httpx.post(
            f"{url}/wallets/testnet/funds", headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        assert granted.status_code == 200, granted.text
        saved_before_stop = state.stat().st_mtime_ns
        assert server.stop(sig) == 0
        assert b"Traceback" not in server.output()
    assert state.stat().st_mtime_ns > saved_before_stop
    assert running_devchain(tmp_path / "var") is None

    with Serve(sqlite_env):
        chain = running_devchain(tmp_path / "var")
        assert chain is not None
        with JsonRpc(chain.rpc_url) as rpc:
            assert rpc.erc20_balance(USDC_ADDRESS, wallet) == 10_000_000
