"""bench/cpu_time.py tells a supervisor's workers that accept connections from the others."""

from __future__ import annotations

import http.client
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A worker serving the supervisor's socket on an event loop, and one only holding it.
SERVING = """
import asyncio, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
async def main():
    loop = asyncio.get_running_loop()
    await loop.create_server(asyncio.Protocol, sock=sock)
    print("serving", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""
HOLDING = """
import socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
print("holding", flush=True)
sys.stdin.read()
"""
SUPERVISOR = f"""
import socket, subprocess, sys
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
fd = listener.fileno()
workers = [
    subprocess.Popen(
        [sys.executable, "-c", code, str(fd)],
        pass_fds=(fd,), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    for code in ({SERVING!r}, {HOLDING!r})
]
for worker in workers:
    worker.stdout.readline()
print("ready", listener.getsockname()[1], flush=True)
sys.stdin.read()
for worker in workers:
    worker.communicate("")
"""


@pytest.fixture(scope="module")
def cpu_time() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cpu_time", ROOT / "bench" / "cpu_time.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def supervisor() -> Iterator[tuple[int, int]]:
    """The supervisor above, started: its pid and its listening port."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, port = proc.stdout.readline().split()
        assert ready == "ready"
        yield proc.pid, int(port)
    finally:
        proc.communicate("", timeout=30)


def test_only_a_worker_whose_loop_watches_the_socket_counts(
    cpu_time: ModuleType, supervisor: tuple[int, int]
) -> None:
    pid, _ = supervisor
    assert len(cpu_time.children(pid)) == 2
    assert cpu_time.accepting_workers(pid) == 1


def test_each_workers_connections_are_counted(
    cpu_time: ModuleType, supervisor: tuple[int, int]
) -> None:
    pid, port = supervisor
    clients: list[socket.socket] = []
    try:
        assert cpu_time.connections_per_worker(pid, port) == [0, 0]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        deadline = time.monotonic() + 10
        while sum(cpu_time.connections_per_worker(pid, port)) < 3:
            assert time.monotonic() < deadline, "the serving worker did not accept them"
            time.sleep(0.05)
        # Only the worker on an event loop accepts: it holds all three.
        assert cpu_time.connections_per_worker(pid, port) == [3, 0]
        assert cpu_time.connections_per_worker(pid, port + 1) == [0, 0]
    finally:
        for client in clients:
            client.close()


def test_paysign_serve_workers_are_all_seen_accepting(cpu_time: ModuleType, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env["PAYSIGN_DATA_DIR"] = str(tmp_path / "data")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "serve.log").open("wb")
    serve = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "paysign"),
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
        ],
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 90
        while cpu_time.accepting_workers(serve.pid) < 2:
            assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-2000:]
            time.sleep(0.1)
        workers = [
            pid
            for pid in cpu_time.children(serve.pid)
            if b"paysign.serving.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(workers) == 2
        assert cpu_time.accepting_workers(serve.pid) == 2
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        serve.terminate()
        serve.wait(timeout=30)
        log.close()
