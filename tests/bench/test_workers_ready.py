"""bench/cpu_time.py tells a supervisor's workers that take connections from the others."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from serving_support import bench_module

ROOT = Path(__file__).resolve().parents[2]

# Workers as the supervisor starts them (the module's name, then the channel's descriptor): one
# whose event loop watches its channel and keeps what it is handed, one only holding it.
SERVING = """
import asyncio, socket, sys
channel = socket.socket(fileno=int(sys.argv[2]))
held = []
def receive():
    _, fds, _, _ = socket.recv_fds(channel, 1, 1)
    held.extend(socket.socket(fileno=fd) for fd in fds)
async def main():
    loop = asyncio.get_running_loop()
    loop.add_reader(channel.fileno(), receive)
    print("serving", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""
HOLDING = """
import socket, sys
channel = socket.socket(fileno=int(sys.argv[2]))
print("holding", flush=True)
sys.stdin.read()
"""
# Connections are handed to the serving worker only.
SUPERVISOR = f"""
import socket, subprocess, sys
from paysign.serving.handoff import ConnectionHandoff, worker_channel
listener = socket.create_server(("127.0.0.1", 0))
handoff = ConnectionHandoff(listener)
channels, workers = [], []
for code in ({SERVING!r}, {HOLDING!r}):
    ours, theirs = worker_channel()
    workers.append(subprocess.Popen(
        [sys.executable, "-c", code, "paysign.serving.worker", str(theirs.fileno())],
        pass_fds=(theirs.fileno(),), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ))
    theirs.close()
    channels.append(ours)
for worker in workers:
    worker.stdout.readline()
handoff.route_to(channels[:1])
handoff.start()
print("ready", listener.getsockname()[1], flush=True)
sys.stdin.read()
handoff.stop()
for worker in workers:
    worker.communicate("")
"""


@pytest.fixture(scope="module")
def cpu_time() -> ModuleType:
    return bench_module("cpu_time")


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


def test_only_a_worker_whose_loop_watches_its_channel_counts(
    cpu_time: ModuleType, supervisor: tuple[int, int]
) -> None:
    pid, _ = supervisor
    assert len(cpu_time.workers(pid)) == 2
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
        # Only the worker on an event loop is handed any: it holds all three.
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
        assert len(cpu_time.workers(serve.pid)) == 2
        assert cpu_time.accepting_workers(serve.pid) == 2
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        serve.terminate()
        serve.wait(timeout=30)
        log.close()
