"""A data directory's dev-chain files, and what another process can learn from them.

``<data_dir>/devchain/`` holds ``state.json`` (the saved chain), ``running.json`` (the running
chain's address, while it runs) and ``owner.lock`` (``flock``-ed by the running process; the
kernel drops it when that process dies, so a stale ``running.json`` is recognisable). Here:
the layout, atomic writes, and the two questions asked from outside — which chain is running
(``paysign devchain info``, the demo), and forgetting the saved chain (``paysign devchain
reset``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paysign.chain.anvil import DevchainError


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
    state_file = directory / "state.json"
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
