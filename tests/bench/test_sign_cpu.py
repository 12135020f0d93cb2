"""bench/cpu_time.py counts a server's signer process in its CPU per request."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

# A stand-in server: it starts a real signer process and an unrelated child, has the signer
# make 20,000 signatures (a good part of a CPU second), then waits for its stdin to close.
SERVER = """
import subprocess, sys
signer = subprocess.Popen(
    [sys.executable, "-m", "paysign.custody.signer_worker"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
)
other = subprocess.Popen(["sleep", "60"])
assert signer.stdout.read(1) == b"\\x01"
job = bytes(31) + b"\\x01" + bytes(32)
for _ in range(40):
    signer.stdin.write(job * 500)
    signer.stdin.flush()
    assert len(signer.stdout.read(65 * 500)) == 65 * 500
print(signer.pid, other.pid, flush=True)
sys.stdin.read()
other.kill()
"""


@pytest.fixture(scope="module")
def cpu_time() -> ModuleType:
    # Under pytest, tests/bench is the package `bench`: the benchmark's module is loaded from
    # its file instead.
    spec = importlib.util.spec_from_file_location("bench_cpu_time", BENCH / "cpu_time.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_signer_process_is_part_of_the_servers_cpu(cpu_time: ModuleType) -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        signer_pid, other_pid = map(int, server.stdout.readline().split())
        assert cpu_time.signer_children(server.pid) == [signer_pid]  # not `sleep`
        own = cpu_time.own_cpu_seconds(server.pid)
        signer = cpu_time.own_cpu_seconds(signer_pid)
        total = cpu_time.process_cpu_seconds(server.pid)
        assert signer > 0.05
        assert total == pytest.approx(own + signer, abs=0.02)
        assert cpu_time.signer_children(other_pid) == []
    finally:
        server.communicate("", timeout=30)


# A stand-in supervisor: two workers, each a stand-in server above with its own signer process.
SUPERVISOR = f"""
import subprocess, sys
workers = [
    subprocess.Popen(
        [sys.executable, "-c", {SERVER!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    for _ in range(2)
]
signers = [worker.stdout.readline().split()[0] for worker in workers]
print(*[worker.pid for worker in workers], *signers, flush=True)
sys.stdin.read()
for worker in workers:
    worker.communicate("")
"""


def test_a_supervisors_cpu_sums_its_workers_and_their_signers(cpu_time: ModuleType) -> None:
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert supervisor.stdout is not None
        first, second, *signers = map(int, supervisor.stdout.readline().split())
        below = cpu_time.descendants(supervisor.pid)
        assert {first, second, *signers} <= set(below)
        assert len(below) == 6  # and each worker's `sleep`
        assert sorted(cpu_time.signer_descendants(supervisor.pid)) == sorted(signers)
        assert cpu_time.signer_children(supervisor.pid) == []  # not its own children

        def own(pid: int) -> float:
            seconds = cpu_time.own_cpu_seconds(pid)
            assert seconds is not None
            return float(seconds)

        signing = sum(own(pid) for pid in signers)
        assert signing > 0.1
        total = cpu_time.process_cpu_seconds(supervisor.pid)
        assert total == pytest.approx(sum(own(pid) for pid in [supervisor.pid, *below]), abs=0.02)
        without = cpu_time.cpu_seconds_without_signers(supervisor.pid)
        assert without == pytest.approx(total - signing, abs=0.02)
    finally:
        supervisor.communicate("", timeout=60)


def test_a_process_cpu_time_splits_into_user_and_system(cpu_time: ModuleType) -> None:
    user, system = cpu_time.own_cpu_split(os.getpid())
    sum(i * i for i in range(3_000_000))  # user time only
    user_after, system_after = cpu_time.own_cpu_split(os.getpid())
    assert user_after > user and system_after >= system
    assert cpu_time.own_cpu_seconds(os.getpid()) >= user_after + system_after
    assert cpu_time.own_cpu_split(2**22 + 1) is None  # no such process
