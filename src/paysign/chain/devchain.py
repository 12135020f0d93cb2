"""The sandbox chain of the embedded default: anvil as a child process, playing Base Sepolia.

Same chain id (84532), same USDC address (``0x036CbD53842c5426634e7929541eC2318f3dCF7e``), same
EIP-712 domain ("USDC", "2"): the committed TestUSDC runtime bytecode is installed at that
address with ``anvil_setCode`` and its ``owner`` slot written with ``anvil_setStorageAt``, so
nothing needs a special case for the dev chain and the official x402 SDK's default asset for
``eip155:84532`` is this token. The treasury (anvil's first well-known account unless
``PAYSIGN_TESTNET_TREASURY_KEY`` is set) owns the token and is minted a large balance.

State lives in ``<data_dir>/devchain/`` (see :mod:`paysign.chain.devchain_files`):

- ``state.json``: the chain, fetched with ``anvil_dumpState`` every ``dump_interval`` seconds
  (when it changed), at a clean stop, and by the sandbox client right after each test-funds
  transfer is mined (``SandboxChain``: a grant answered is a grant saved), written atomically
  (temp file, fsync, rename), and loaded with ``--load-state`` at the next start. A crash
  loses at most one interval of other transactions (a seller's settlement), never a grant.
- ``running.json``: what ``paysign devchain info`` prints, while a chain runs.
- ``owner.lock``: ``flock``-ed by the process that runs the chain, for as long as it runs. The
  kernel drops it when that process dies, so a stale ``running.json`` is recognisable.

anvil is always started with ``--prune-history`` (without it, it writes a state snapshot per
block under ``~/.foundry`` and never deletes it) and without ``--block-time`` (automine: blocks
only when there are transactions, since per-transaction latency grows with chain length).
It runs in its own session, so a terminal's Ctrl-C reaches the server, which dumps and then stops
it; on Linux it also gets ``PR_SET_PDEATHSIG``, so it dies with the process that started it.
If anvil dies on its own, the dump thread restarts it on the same port from the last dump.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import structlog

from paysign.chain.anvil import (
    CHAIN_ID,
    Anvil,
    DevchainError,
    find_anvil,
)
from paysign.chain.devchain_files import (
    DevchainInfo,
    DevchainRunning,
    devchain_dir,
    is_anvil,
    read_json,
    running_devchain,
    save_state,
    state_file_of,
    write_atomically,
)
from paysign.chain.errors import ChainError
from paysign.chain.rpc import JsonRpc
from paysign.chain.testnet import treasury_lock_path
from paysign.chain.treasury import Treasury, parse_private_key
from paysign.chain.usdc import load_test_usdc, mint_data
from paysign.config import BASE_SEPOLIA_USDC, Settings
from paysign.datadir import secure_data_dir
from paysign.protocol import address_of, checksum_address, parse_address

log = structlog.get_logger("paysign.devchain")

NETWORK = "eip155:84532"
#: The token lives where Base Sepolia's USDC lives.
USDC_ADDRESS = parse_address(BASE_SEPOLIA_USDC)
#: anvil's well-known dev accounts ("test test ... junk"): public test keys, never real money.
#: The treasury is account 0; give other senders (a local facilitator, tests) other accounts,
#: so that their nonces never race the treasury's.
ANVIL_DEV_KEYS = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
)
DEV_TREASURY_KEY = ANVIL_DEV_KEYS[0]

#: Minted to the treasury whenever its balance is below the floor (1e9 and 1e6 USDC).
TREASURY_MINT = 1_000_000_000 * 10**6
TREASURY_FLOOR = 1_000_000 * 10**6
#: Gas money: topped up to 10 000 ETH when below 1 ETH.
TREASURY_GAS = 10_000 * 10**18
_GAS_FLOOR = 10**18


def treasury_key_for(settings: Settings) -> bytes:
    """The configured treasury key, else anvil's account 0."""
    return parse_private_key(settings.testnet_treasury_key or DEV_TREASURY_KEY)


class Devchain:
    """The dev chain of one data directory. ``start()`` … ``stop()``, or use it as a context
    manager. Only one process at a time runs a given data directory's chain
    (``DevchainRunning`` otherwise)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int = 0,
        dump_interval: float = 5.0,
        treasury_key: bytes | None = None,
        anvil: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.dir = devchain_dir(data_dir)
        self.state_file = state_file_of(data_dir)
        self.running_file = self.dir / "running.json"
        self.lock_file = self.dir / "owner.lock"
        self.requested_port = port
        self.dump_interval = dump_interval
        self.treasury_key = treasury_key or parse_private_key(DEV_TREASURY_KEY)
        self.treasury_address = address_of(self.treasury_key)
        self._binary = anvil
        self._anvil: Anvil | None = None
        self._rpc: JsonRpc | None = None
        self._lock_fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_dump: bytes | None = None
        self._dump_lock = threading.Lock()
        self.restarts = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> Devchain:
        return cls(
            settings.data_dir,
            port=settings.devchain_port,
            dump_interval=settings.devchain_dump_interval_seconds,
            treasury_key=treasury_key_for(settings),
        )

    # ---- what the rest of the app reads ----

    @property
    def port(self) -> int:
        if self._anvil is None:
            raise DevchainError("the dev chain is not running")
        return self._anvil.port

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """anvil's process id (tests kill it to simulate a crash)."""
        if self._anvil is None:
            raise DevchainError("the dev chain is not running")
        return self._anvil.pid

    @property
    def info(self) -> DevchainInfo:
        return DevchainInfo(
            rpc_url=self.rpc_url,
            chain_id=CHAIN_ID,
            usdc=checksum_address(USDC_ADDRESS),
            treasury=checksum_address(self.treasury_address),
        )

    def settings_for(self, settings: Settings) -> Settings:
        """``settings`` pointed at this chain: ``rpc_urls``, the reconciler and
        ``SandboxChain.from_settings`` then use it like any external chain."""
        return settings.model_copy(
            update={
                "testnet_rpc_url": self.rpc_url,
                "testnet_treasury_key": "0x" + self.treasury_key.hex(),
            }
        )

    # ---- lifecycle ----

    def __enter__(self) -> Devchain:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Devchain:
        # The data directory first: mkdir(parents=True) would make it with the default umask.
        secure_data_dir(self.data_dir)
        self.dir.mkdir(mode=0o700, exist_ok=True)
        self._take_ownership()
        try:
            self._kill_stale_anvil()
            binary = self._binary or find_anvil()
            self._anvil = self._spawn(binary, self.requested_port)
            self._rpc = JsonRpc(self.rpc_url, timeout=10.0)
            self._check_chain()
            self.provision()
            self.dump(force=True)
            write_atomically(self.running_file, orjson.dumps(self._running_record()))
        except BaseException:
            self._shutdown(dump=False)
            raise
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="devchain-dump", daemon=True)
        self._thread.start()
        log.info("devchain_started", rpc_url=self.rpc_url, state=str(self.state_file))
        return self

    def stop(self) -> None:
        """Dump the state one last time, stop anvil, forget ``running.json``. Idempotent."""
        self._stop.set()
        watcher, self._thread = self._thread, None
        if watcher is not None and watcher is not threading.current_thread():
            # The watcher makes the final dump as it exits: an anvil it restarted is its child
            # (PR_SET_PDEATHSIG is per thread) and gets SIGTERM when the thread ends.
            watcher.join()
        self._shutdown(dump=watcher is None)

    def _shutdown(self, *, dump: bool) -> None:
        if self._anvil is not None:
            if dump and self._anvil.alive():
                self._dump_logged("devchain_final_dump_failed")
            self._anvil.stop()
            self._anvil = None
        if self._rpc is not None:
            self._rpc.close()
            self._rpc = None
        if self._lock_fd is not None:
            with contextlib.suppress(FileNotFoundError):
                self.running_file.unlink()
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _take_ownership(self) -> None:
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DevchainRunning(
                f"another process runs the dev chain of {self.data_dir} "
                "(see `paysign devchain info`)"
            ) from None
        self._lock_fd = fd

    def _kill_stale_anvil(self) -> None:
        # We hold the lock, so any recorded anvil outlived its owner (which PR_SET_PDEATHSIG
        # normally prevents). Its unsaved state is gone either way; do not leave it running.
        record = read_json(self.running_file)
        pid = record.get("anvilPid") if record else None
        if isinstance(pid, int) and is_anvil(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(FileNotFoundError):
            self.running_file.unlink()

    def _spawn(self, binary: Path, port: int) -> Anvil:
        state = self.state_file if self.state_file.exists() else None
        try:
            return Anvil(binary, port, state)
        except DevchainError:
            if state is None:
                raise
        # anvil refused the saved state (corrupt, or written by another anvil version): keep
        # the file for inspection and start afresh rather than not at all.
        kept = self.state_file.with_name(f"state.unreadable-{int(time.time())}.json")
        os.replace(self.state_file, kept)
        log.error("devchain_state_unreadable", kept=str(kept))
        return Anvil(binary, port, None)

    def _check_chain(self) -> None:
        assert self._rpc is not None
        chain_id = self._rpc.chain_id()
        if chain_id != CHAIN_ID:
            raise DevchainError(f"anvil reports chain id {chain_id}, expected {CHAIN_ID}")

    def _running_record(self) -> dict[str, Any]:
        assert self._anvil is not None
        return {
            **self.info.as_json(),
            "anvilPid": self._anvil.pid,
            "ownerPid": os.getpid(),
            "stateFile": str(self.state_file.resolve()),
            "startedAt": int(time.time()),
        }

    # ---- the token and the treasury ----

    def provision(self) -> None:
        """Make the chain what paysign expects; idempotent, so it runs on every start: the token's
        code at the USDC address (replaced if the artifact changed), its owner the treasury, the
        treasury funded with gas and test USDC."""
        rpc = self._rpc
        assert rpc is not None
        artifact = load_test_usdc()
        usdc = "0x" + USDC_ADDRESS.hex()
        if rpc.code(USDC_ADDRESS) != artifact.runtime_bytecode:
            rpc.request("anvil_setCode", [usdc, "0x" + artifact.runtime_bytecode.hex()])
        owner_slot = artifact.storage_slots["owner"]
        owner_word = bytes(12) + self.treasury_address
        if rpc.storage_at(USDC_ADDRESS, owner_slot) != owner_word:
            rpc.request(
                "anvil_setStorageAt",
                [usdc, "0x" + owner_slot.to_bytes(32, "big").hex(), "0x" + owner_word.hex()],
            )
        if rpc.balance(self.treasury_address) < _GAS_FLOOR:
            rpc.request("anvil_setBalance", ["0x" + self.treasury_address.hex(), hex(TREASURY_GAS)])
        if rpc.erc20_balance(USDC_ADDRESS, self.treasury_address) < TREASURY_FLOOR:
            treasury = Treasury(rpc, self.treasury_key, lock_path=treasury_lock_path(self.data_dir))
            treasury.send(USDC_ADDRESS, mint_data(self.treasury_address, TREASURY_MINT))

    # ---- persistence ----

    def dump(self, *, force: bool = False) -> bool:
        """Fetch the chain state and write it atomically if it changed; True when written."""
        rpc = self._rpc
        if rpc is None:
            raise DevchainError("the dev chain is not running")
        with self._dump_lock:
            state = save_state(rpc, self.state_file, unless=None if force else self._last_dump)
            if state is None:
                return False
            self._last_dump = state
            return True

    def _watch(self) -> None:
        while not self._stop.wait(self.dump_interval):
            anvil = self._anvil
            if anvil is None:
                return
            try:
                if not anvil.alive():
                    self._restart(anvil)
                    continue
            except Exception:  # the watcher is what restarts anvil: it must outlive anything
                log.exception("devchain_watch_failed")
                continue
            self._dump_logged("devchain_dump_failed")
        if self._anvil is not None and self._anvil.alive():
            self._dump_logged("devchain_final_dump_failed")

    def _dump_logged(self, event: str) -> None:
        try:
            self.dump()
        except (ChainError, OSError) as exc:
            log.warning(event, error=str(exc))
        except Exception:  # not expected; logged, and the next interval tries again
            log.exception(event)

    def _restart(self, dead: Anvil) -> None:
        log.error("devchain_died", exit_code=dead.process.returncode, output="\n".join(dead.tail))
        try:
            binary = self._binary or find_anvil()
            self._anvil = self._spawn(binary, dead.port)  # same port: clients keep their URL
            self.provision()
            self.restarts += 1
            write_atomically(self.running_file, orjson.dumps(self._running_record()))
            log.warning("devchain_restarted", rpc_url=self.rpc_url, from_state=True)
        except (ChainError, OSError) as exc:
            self._anvil = dead  # try again next interval
            log.error("devchain_restart_failed", error=str(exc))


@contextlib.contextmanager
def sandbox_chain(settings: Settings) -> Iterator[Settings]:
    """For ``paysign serve``: the settings to serve with, a dev chain running meanwhile.

    With ``testnet_rpc_url`` set nothing starts and ``settings`` is yielded unchanged. Otherwise
    the data directory's dev chain is started (and stopped on exit), or, when another server on
    the same data directory already runs it, joined; the yielded settings point at it.
    """
    if settings.testnet_rpc_url:
        yield settings
        return
    devchain = Devchain.from_settings(settings)
    try:
        devchain.start()
    except DevchainRunning:
        running = running_devchain(settings.data_dir)
        if running is None:
            raise
        log.info("devchain_joined", rpc_url=running.rpc_url)
        yield settings.model_copy(
            update={
                "testnet_rpc_url": running.rpc_url,
                "testnet_treasury_key": "0x" + treasury_key_for(settings).hex(),
            }
        )
        return
    try:
        yield devchain.settings_for(settings)
    finally:
        devchain.stop()
