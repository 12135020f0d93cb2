"""``paysign serve`` as a real process, stopped by a signal of the test's choosing, and the
worker processes of ``serve --workers N`` as /proc shows them."""

from __future__ import annotations

import importlib.util
import os
import signal
from pathlib import Path
from types import ModuleType

from conftest import ServeProcess


class Serve(ServeProcess):
    """``paysign serve ARGS``, given a minute to start (a supervisor starts its workers);
    ``stop(sig)`` returns its exit status."""

    def __init__(self, env: dict[str, str], *args: str, port: int | None = None) -> None:
        super().__init__(env, *args, port=port, start_within=60)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` that run a paysign worker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == pid and state != "Z" and b"paysign.serving.worker" in cmdline:
            found.append(int(entry.name))
    return sorted(found)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def bench_module(name: str) -> ModuleType:
    """``bench/NAME.py`` loaded from its file: the ones that import nothing else of ``bench``
    (``cpu_time``, which reads a server's workers off /proc)."""
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
