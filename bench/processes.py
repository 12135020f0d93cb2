"""The benchmark's child processes: each one started is recorded, so that all are stopped."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any

CHILDREN: list[subprocess.Popen[bytes]] = []


def spawn(
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    capture: bool = False,
) -> subprocess.Popen[bytes]:
    stdout: Any = subprocess.PIPE if capture else subprocess.DEVNULL
    stderr: Any = subprocess.DEVNULL
    if log_path is not None:
        handle = log_path.open("ab")
        stderr = handle
        if not capture:
            stdout = handle
    # A new session: Ctrl-C reaches only us, and we stop the children in order.
    proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr, start_new_session=True)
    CHILDREN.append(proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()  # by pid: only the process we started
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    if proc in CHILDREN:
        CHILDREN.remove(proc)


def stop_all() -> None:
    for proc in list(reversed(CHILDREN)):
        with contextlib.suppress(Exception):
            stop(proc)


def tail(path: Path, lines: int = 20) -> str:
    """The end of a child's log, for the error that reports it dead or silent."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
