"""The dev chain's life: deterministic start, state kept across restarts (clean stop, a crashed
server, a crashed anvil), reset, one owner per data directory, ``paysign devchain`` and
``sandbox_chain`` as ``paysign serve`` uses it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from paysign.chain.cli import devchain as devchain_cli
from paysign.chain.devchain import TREASURY_MINT, USDC_ADDRESS, Devchain, sandbox_chain
from paysign.chain.devchain_files import DevchainRunning, reset_devchain, running_devchain
from paysign.chain.rpc import JsonRpc
from paysign.chain.testnet import SandboxChain
from paysign.config import Settings

from .conftest import new_address, state_mtime, wait_for

FAST = 0.2  # dump interval for these tests, seconds


def _balance(rpc_url: str, owner: bytes) -> int:
    with JsonRpc(rpc_url) as rpc:
        return rpc.erc20_balance(USDC_ADDRESS, owner)


def _send(rpc_url: str, treasury_key: bytes, data_dir: Path, to: bytes, amount: int) -> str:
    chain = SandboxChain(
        rpc_url,
        usdc=USDC_ADDRESS,
        treasury_key=treasury_key,
        lock_path=data_dir / "testnet-treasury.lock",
    )
    try:
        return chain.send_usdc(to, amount).transaction_hash
    finally:
        chain.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_fresh_chain_is_deterministic(tmp_path: Path) -> None:
    first, second = [], []
    for directory, out in ((tmp_path / "a", first), (tmp_path / "b", second)):
        with Devchain(directory, dump_interval=60) as chain, JsonRpc(chain.rpc_url) as rpc:
            out.append(rpc.block_number())
            out.append(rpc.request("eth_getBlockByNumber", ["0x1", False])["transactions"])
            out.append(rpc.erc20_balance(USDC_ADDRESS, chain.treasury_address))
            out.append(chain.info.as_json() | {"rpcUrl": None})
    assert first == second
    assert first[0] == 1 and first[2] == TREASURY_MINT
    assert first[3] == {
        "rpcUrl": None,
        "chainId": 84532,
        "usdc": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
        "treasury": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    }


def test_state_survives_a_clean_restart(tmp_path: Path) -> None:
    wallet = new_address()
    with Devchain(tmp_path, dump_interval=60) as chain:
        _send(chain.rpc_url, chain.treasury_key, tmp_path, wallet, 3_000_000)
        with JsonRpc(chain.rpc_url) as rpc:
            blocks = rpc.block_number()
            nonce = rpc.transaction_count(chain.treasury_address)
    with Devchain(tmp_path, dump_interval=60) as chain, JsonRpc(chain.rpc_url) as rpc:
        assert rpc.erc20_balance(USDC_ADDRESS, wallet) == 3_000_000
        assert rpc.block_number() == blocks  # no re-mint, no re-deploy: provisioning is idempotent
        assert rpc.transaction_count(chain.treasury_address) == nonce
        _send(chain.rpc_url, chain.treasury_key, tmp_path, wallet, 1)  # the nonce carries on
        assert rpc.erc20_balance(USDC_ADDRESS, wallet) == 3_000_001


_SERVER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from paysign.chain.devchain import Devchain
    chain = Devchain(Path(sys.argv[1]), dump_interval=float(sys.argv[2])).start()
    print("READY", chain.rpc_url, chain.pid, flush=True)
    time.sleep(600)
    """
)


def test_state_survives_a_killed_server_past_one_dump_interval(tmp_path: Path) -> None:
    # `paysign serve` SIGKILLed: no clean stop, no final dump. anvil dies with it
    # (PR_SET_PDEATHSIG) and the next start has everything up to the last periodic dump.
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(tmp_path), str(FAST)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        while not line.startswith("READY"):  # structlog's default output comes first
            line = server.stdout.readline()
        _, rpc_url, anvil_pid = line.split()
        running = running_devchain(tmp_path)
        assert running is not None and running.rpc_url == rpc_url
        with pytest.raises(DevchainRunning):
            Devchain(tmp_path).start()

        wallet = new_address()
        key = bytes.fromhex("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
        before = state_mtime(tmp_path)
        _send(rpc_url, key, tmp_path, wallet, 4_000_000)
        wait_for(lambda: state_mtime(tmp_path) != before, timeout=5)
    finally:
        server.kill()
        server.wait()
    wait_for(lambda: not _alive(int(anvil_pid)), timeout=5)
    assert running_devchain(tmp_path) is None  # the flock died with its owner

    with Devchain(tmp_path, dump_interval=60) as chain:
        assert _balance(chain.rpc_url, wallet) == 4_000_000


def test_a_killed_anvil_is_restarted_from_its_last_dump(tmp_path: Path) -> None:
    wallet = new_address()
    with Devchain(tmp_path, dump_interval=FAST) as chain:
        url, first_pid = chain.rpc_url, chain.pid
        before = state_mtime(tmp_path)
        _send(url, chain.treasury_key, tmp_path, wallet, 2_500_000)
        wait_for(lambda: state_mtime(tmp_path) != before, timeout=5)

        os.kill(first_pid, signal.SIGKILL)
        wait_for(lambda: chain.restarts == 1, timeout=5)
        assert chain.pid != first_pid and chain.rpc_url == url  # same URL for every client
        assert _balance(url, wallet) == 2_500_000
        _send(url, chain.treasury_key, tmp_path, wallet, 1)
        assert _balance(url, wallet) == 2_500_001
    # The restarted anvil's state was dumped at the clean stop too.
    with Devchain(tmp_path, dump_interval=60) as chain:
        assert _balance(chain.rpc_url, wallet) == 2_500_001


def test_reset_forgets_the_chain_and_is_refused_while_it_runs(tmp_path: Path) -> None:
    wallet = new_address()
    with Devchain(tmp_path, dump_interval=60) as chain:
        _send(chain.rpc_url, chain.treasury_key, tmp_path, wallet, 1_000_000)
        with pytest.raises(DevchainRunning):
            reset_devchain(tmp_path)

    report = reset_devchain(tmp_path)
    assert report["forgot"]["blocks"] == 2 and report["forgot"]["transactions"] == 2
    assert not (tmp_path / "devchain" / "state.json").exists()
    assert reset_devchain(tmp_path)["forgot"] is None

    with Devchain(tmp_path, dump_interval=60) as chain, JsonRpc(chain.rpc_url) as rpc:
        assert rpc.erc20_balance(USDC_ADDRESS, wallet) == 0
        assert rpc.block_number() == 1
        assert rpc.erc20_balance(USDC_ADDRESS, chain.treasury_address) == TREASURY_MINT


def test_an_unreadable_state_file_is_kept_aside_and_the_chain_starts_fresh(
    tmp_path: Path,
) -> None:
    (tmp_path / "devchain").mkdir()
    (tmp_path / "devchain" / "state.json").write_text("{not json")
    with Devchain(tmp_path, dump_interval=60) as chain, JsonRpc(chain.rpc_url) as rpc:
        assert rpc.block_number() == 1
    assert list((tmp_path / "devchain").glob("state.unreadable-*.json"))


def test_devchain_cli_info_and_reset(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"PAYSIGN_DATA_DIR": str(tmp_path), "PAYSIGN_TESTNET_RPC_URL": None}

    result = runner.invoke(devchain_cli, ["info"], env=env)
    assert result.exit_code == 1 and "no dev chain is running" in result.output

    with Devchain(tmp_path, dump_interval=60) as chain:
        result = runner.invoke(devchain_cli, ["info"], env=env)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == chain.info.as_json()
        refused = runner.invoke(devchain_cli, ["reset"], env=env)
        assert refused.exit_code == 1 and "stop the server" in refused.output

    result = runner.invoke(devchain_cli, ["reset"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["reset"] is True and report["forgot"]["blocks"] == 1
    assert "balance" in report["note"]

    # An external chain: info reads it, reset refuses.
    with Devchain(tmp_path / "other", dump_interval=60) as chain:
        external = {**env, "PAYSIGN_TESTNET_RPC_URL": chain.rpc_url}
        result = runner.invoke(devchain_cli, ["info"], env=external)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["chainId"] == 84532
        assert runner.invoke(devchain_cli, ["reset"], env=external).exit_code == 1


def test_sandbox_chain_starts_joins_or_leaves_alone(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, devchain_dump_interval_seconds=60)
    with sandbox_chain(settings) as served:
        assert served.testnet_rpc_url is not None
        assert served.rpc_urls["eip155:84532"] == served.testnet_rpc_url
        chain = SandboxChain.from_settings(served)
        assert chain is not None and chain.treasury is not None
        assert chain.usdc_balance(chain.treasury.address) == TREASURY_MINT
        chain.close()
        # A second server on the same data directory joins the running chain.
        with sandbox_chain(settings) as joined:
            assert joined.testnet_rpc_url == served.testnet_rpc_url
        assert running_devchain(tmp_path) is not None  # the joiner did not stop it
    assert running_devchain(tmp_path) is None

    external = Settings(data_dir=tmp_path / "x", testnet_rpc_url="http://127.0.0.1:1")
    with sandbox_chain(external) as served:
        assert served is external
    assert not (tmp_path / "x" / "devchain").exists()
