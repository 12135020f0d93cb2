"""A data directory's dev-chain files, and what another process can learn from them.

``<data_dir>/devchain/`` holds ``state.json`` (the saved chain), ``running.json`` (the running
chain's address, while it runs), ``owner.lock`` (``flock``-ed by the running process; the
kernel drops it when that process dies, so a stale ``running.json`` is recognisable) and
``state.lock`` (held while the state is fetched and written). Here: the layout, atomic writes,
saving the state, and the questions asked from outside — which chain is running (``paysign
devchain info``, the demo, a server's faucet), and forgetting the saved chain (``paysign
devchain reset``).
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paysign.chain.anvil import DevchainError
from paysign.chain.rpc import JsonRpc


class DevchainRunning(DevchainError):
    """Another process runs this data directory's dev chain."""


@dataclass(frozen=True, slots=True)
class DevchainInfo:
    rpc_url: str
    chain_id: int
    usdc: str  # EIP-55
    treasury: str  # EIP-55

    def as_json(self) -> dict[str, Any]:
        return {
            "rpcUrl": self.rpc_url,
            "chainId": self.chain_id,
            "usdc": self.usdc,
            "treasury": self.treasury,
        }


def devchain_dir(data_dir: Path) -> Path:
    return data_dir / "devchain"


def state_file_of(data_dir: Path) -> Path:
    return devchain_dir(data_dir) / "state.json"


def save_state(rpc: JsonRpc, state_file: Path, *, unless: bytes | None = None) -> bytes | None:
    """Fetch the chain's state (``anvil_dumpState``) and write it atomically to ``state_file``;
    the state written, or None when it equals ``unless`` (nothing written).

    Under ``state.lock``: the periodic dump and the saves after each test-funds grant, in any
    thread of any process, each fetch and write in turn, so an older state never replaces a
    newer one."""
    with _locked(state_file.with_name("state.lock")):
        result = rpc.request("anvil_dumpState")
        if not isinstance(result, str) or not result.startswith("0x"):
            raise DevchainError("anvil_dumpState answered no data")
        try:
            state = gzip.decompress(bytes.fromhex(result[2:]))  # --load-state reads plain JSON
        except (ValueError, OSError, EOFError) as exc:
            raise DevchainError(f"anvil_dumpState answered unreadable data: {exc}") from None
        if state == unless:
            return None
        write_atomically(state_file, state)
        return state


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def is_anvil(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"anvil" in cmdline.split(b"\0", 1)[0]


def owner_alive(data_dir: Path) -> bool:
    lock_file = devchain_dir(data_dir) / "owner.lock"
    if not lock_file.exists():
        return False
    fd = os.open(lock_file, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases the lock if we got it
    return False


def running_state_file(data_dir: Path, rpc_url: str) -> Path | None:
    """Where the chain at ``rpc_url`` is saved, when it is ``data_dir``'s running dev chain
    (saved by ``save_state``); None for any other chain."""
    running = running_devchain(data_dir)
    if running is None or running.rpc_url != rpc_url:
        return None
    return state_file_of(data_dir)


def running_devchain(data_dir: Path) -> DevchainInfo | None:
    """The chain a live process (``paysign serve``) runs for ``data_dir``; None when none does."""
    if not owner_alive(data_dir):
        return None
    record = read_json(devchain_dir(data_dir) / "running.json")
    if record is None:
        return None  # its owner is still starting it, or stopping it
    return DevchainInfo(
        rpc_url=str(record["rpcUrl"]),
        chain_id=int(record["chainId"]),
        usdc=str(record["usdc"]),
        treasury=str(record["treasury"]),
    )


def reset_devchain(data_dir: Path) -> dict[str, Any]:
    """Forget the saved chain so the next start is a fresh one; returns what was forgotten.

    Refused (``DevchainRunning``) while a process runs the chain: swapping the chain under a
    live server would leave it talking to a chain whose history it no longer matches.
    """
    directory = devchain_dir(data_dir)
    if owner_alive(data_dir):
        raise DevchainRunning(
            f"a dev chain is running for {data_dir} (paysign serve): stop the server, then reset"
        )
    state_file = state_file_of(data_dir)
    forgot: dict[str, Any] | None = None
    if state_file.exists():
        size = state_file.stat().st_size
        state = read_json(state_file) or {}
        forgot = {
            "blocks": state.get("best_block_number"),
            "transactions": len(state.get("transactions") or ()),
            "accounts": len(state.get("accounts") or {}),
            "bytes": size,
        }
        state_file.unlink()
    with contextlib.suppress(FileNotFoundError):
        (directory / "running.json").unlink()  # stale: its owner is gone
    return {"stateFile": str(state_file.resolve()), "forgot": forgot}
