"""One anvil process: found, spawned in its own session (dying with its parent on Linux),
its output drained, its port read. The dev chain's lifecycle is in :mod:`devchain`."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from paysign.chain.errors import ChainError

CHAIN_ID = 84532
ANVIL_ENV = "PAYSIGN_ANVIL_BIN"
_STARTUP_SECONDS = 15.0
_STOP_SECONDS = 5.0
_TAIL_LINES = 40
_LISTENING = "Listening on "


class DevchainError(ChainError):
    """The dev chain could not be started, or refused an operation."""


class AnvilNotFound(DevchainError):
    pass


def find_anvil() -> Path:
    """``$PAYSIGN_ANVIL_BIN``, else the project's ``node_modules`` (``make install``), else PATH.

    ``@foundry-rs/anvil`` brings the binary as whichever of its per-platform optional packages
    (``@foundry-rs/anvil-linux-amd64``, ``-darwin-arm64`` …) npm chose for this machine, hoisted
    or nested under it. That binary is preferred over ``node_modules/.bin/anvil`` (a Node
    wrapper): signals then reach anvil itself.
    """
    explicit = os.environ.get(ANVIL_ENV)
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise AnvilNotFound(f"{ANVIL_ENV}={explicit} is not an executable file")
        return path
    roots = [Path(__file__).resolve().parents[3], Path.cwd()]
    for root in dict.fromkeys(roots):
        modules = root / "node_modules"
        binaries = [
            *sorted(modules.glob("@foundry-rs/anvil-*/bin/anvil")),
            *sorted(modules.glob("@foundry-rs/anvil/node_modules/@foundry-rs/anvil-*/bin/anvil")),
        ]
        for candidate in binaries:
            if os.access(candidate, os.X_OK):
                return candidate
        wrapper = modules / ".bin" / "anvil"
        if os.access(wrapper, os.X_OK):
            return wrapper
    on_path = shutil.which("anvil")
    if on_path:
        return Path(on_path)
    raise AnvilNotFound(
        "anvil was not found: run `make install` (npm ci installs @foundry-rs/anvil and this "
        f"platform's binary into node_modules), or set {ANVIL_ENV}, or set "
        "PAYSIGN_TESTNET_RPC_URL to use another chain"
    )


def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Resolved once in the parent: between fork and exec the child must not touch the loader.
_PRCTL = _prctl()
_PR_SET_PDEATHSIG = 1


def _child_setup(parent_pid: int) -> None:  # runs in the child between fork and exec
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)


class Anvil:
    """One anvil process: spawned, its stdout drained (it logs every request), its port read."""

    def __init__(self, binary: Path, port: int, state_file: Path | None) -> None:
        args = [
            str(binary),
            "--chain-id",
            str(CHAIN_ID),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--prune-history",
        ]
        if state_file is not None:
            args += ["--load-state", str(state_file)]
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._listening = threading.Event()
        self.port = 0
        self.process = subprocess.Popen(  # noqa: S603 -- fixed arguments, our own binary
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=functools.partial(_child_setup, os.getpid()),
        )
        assert self.process.stdout is not None
        threading.Thread(
            target=self._drain, args=(self.process.stdout,), name="anvil-output", daemon=True
        ).start()
        deadline = time.monotonic() + _STARTUP_SECONDS
        while not self._listening.wait(0.01):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                output = "\n".join(self.tail)
                raise DevchainError(f"anvil did not start:\n{output}")

    def _drain(self, stream: IO[bytes]) -> None:
        # Reads until anvil exits: a reader that stopped early would leave anvil blocked on a
        # full pipe (it logs every request), so a line it cannot parse is only kept.
        for raw in stream:
            line = raw.decode("utf-8", errors="replace").rstrip()
            self.tail.append(line)
            if not self._listening.is_set() and line.startswith(_LISTENING):
                port = line.rsplit(":", 1)[1]
                if port.isdigit():
                    self.port = int(port)
                    self._listening.set()
        stream.close()

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(_STOP_SECONDS)
