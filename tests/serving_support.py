"""``paysign serve`` as a real process, stopped by a signal of the test's choosing, and the
worker processes of ``serve --workers N`` as /proc shows them."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from conftest import ServeProcess, free_port


class Serve(ServeProcess):
    """``paysign serve ARGS``; ``stop(sig)`` returns its exit status."""

    def __init__(self, env: dict[str, str], *args: str, port: int | None = None) -> None:
        super().__init__(env)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = args

    def __enter__(self) -> str:
        import subprocess
        import tempfile
        import time

        import httpx

        from conftest import PAYSIGN

        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [PAYSIGN, "serve", "--host", "127.0.0.1", "--port", str(self.port), *self.args],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self.url
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"server did not start: {self.output().decode()[-2000:]}")
            time.sleep(0.1)

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
