"""The servers under test: paysign with a fresh account, and the bare Starlette ceiling."""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.accounts import bench_account
from bench.cpu_time import accepting_workers
from bench.paysign_cli import paysign_cmd, paysign_env
from bench.processes import spawn, tail
from bench.request import HOST, PATH

BENCH_DIR = Path(__file__).resolve().parent


@dataclass
class Target:
    name: str
    port: int
    api_key: str | None
    proc: subprocess.Popen[bytes]
    log_path: Path
    runs: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # PAYSIGN_* of `paysign admin` calls
    email: str = ""
    #: Every account's key the load rotates over (``--accounts``); ``api_key`` is the first.
    load_keys: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{PATH}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_healthy(
    proc: subprocess.Popen[bytes], port: int, log_path: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}:\n{tail(log_path)}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection(HOST, port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                conn.close()
                return
            conn.close()
        time.sleep(0.1)
    raise SystemExit(f"server on port {port} not healthy after {timeout} s:\n{tail(log_path)}")


def wait_accepting(
    proc: subprocess.Popen[bytes], workers: int, log_path: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while accepting_workers(proc.pid) < workers:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}:\n{tail(log_path)}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{workers} workers not all ready in {timeout} s:\n{tail(log_path)}")
        time.sleep(0.1)


def start_paysign(
    name: str,
    workdir: Path,
    database_url: str | None,
    extra_env: dict[str, str] | None = None,
    workers: int = 1,
    accounts: int = 1,
) -> Target:
    """``paysign serve`` with ``accounts`` fresh accounts, whose keys the load rotates over;
    ``workers`` > 1 starts a supervisor."""
    data_dir = workdir / name
    data_dir.mkdir(mode=0o700)
    env = {**paysign_env(data_dir, database_url), **(extra_env or {})}
    email, api_key = bench_account(env, workdir)
    with ThreadPoolExecutor(8) as pool:  # each is three `paysign admin` processes
        made = list(pool.map(lambda _: bench_account(env, workdir), range(accounts - 1)))
    others = [api_key for _, api_key in made]
    port = free_port()
    log_path = workdir / f"{name}.log"
    cmd = [*paysign_cmd(), "serve", "--host", HOST, "--port", str(port)]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    proc = spawn(cmd, env=env, log_path=log_path)
    wait_healthy(proc, port, log_path)
    if workers > 1:
        # A supervisor's port answers once one of its workers is ready: wait for the others.
        wait_accepting(proc, workers, log_path)
    keys = (api_key, *others)
    return Target(name, port, api_key, proc, log_path, env=env, email=email, load_keys=keys)


def start_ceiling(workdir: Path, response_bytes: int, *, one_write: bool = False) -> Target:
    """The bare Starlette app; ``one_write``: served with paysign's ``OneWriteProtocol``."""
    port = free_port()
    log_path = workdir / ("ceiling-one-write.log" if one_write else "ceiling.log")
    proc = spawn(
        [
            sys.executable,
            str(BENCH_DIR / "ceiling_app.py"),
            "--host",
            HOST,
            "--port",
            str(port),
            "--response-bytes",
            str(response_bytes),
            *(["--one-write"] if one_write else []),
        ],
        log_path=log_path,
    )
    wait_healthy(proc, port, log_path)
    return Target("ceiling", port, None, proc, log_path)
