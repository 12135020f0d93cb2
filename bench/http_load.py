"""Closed-loop HTTP load on a server (wrk, or bench/loadgen.py): req/s, latency, CPU/req."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.cpu_time import (
    connections_per_worker,
    cpu_seconds_without_signers,
    process_cpu_seconds,
)
from bench.processes import spawn, stop
from bench.servers import Target

BENCH_DIR = Path(__file__).resolve().parent


def pick_loadgen(choice: str) -> str:
    if choice == "wrk" and shutil.which("wrk") is None:
        raise SystemExit("--loadgen wrk: wrk is not installed (apt-get install -y wrk)")
    if choice == "auto":
        return "wrk" if shutil.which("wrk") else "python"
    return choice


def describe_loadgen(loadgen: str, args: argparse.Namespace) -> str:
    """The load generator as the HTTP table's heading names it (wrk with its version)."""
    if loadgen != "wrk":
        return f"bench/loadgen.py ({args.python_client} asyncio client; wrk not found)"
    version = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
    first = (version.stdout + version.stderr).strip().splitlines()
    return f"`{first[0].split(' [')[0] if first else 'wrk'}` -t{args.threads} + bench/sign.lua"


def load(
    target: Target, args: argparse.Namespace, body_file: Path, seconds: float, loadgen: str
) -> dict[str, Any]:
    env = dict(os.environ)
    env["BENCH_BODY_FILE"] = str(body_file)
    env.pop("BENCH_API_KEY", None)
    if target.api_key:
        env["BENCH_API_KEY"] = target.api_key
    if loadgen == "wrk":
        if len(target.load_keys) > 1:  # sign.lua rotates over them
            env["BENCH_API_KEY"] = ",".join(target.load_keys)
        # wrk takes whole seconds only.
        cmd = [
            "wrk",
            f"-t{args.threads}",
            f"-c{args.connections}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "5s",
            "-s",
            str(BENCH_DIR / "sign.lua"),
            target.url,
        ]
    else:
        cmd = [
            sys.executable,
            str(BENCH_DIR / "loadgen.py"),
            "--url",
            target.url,
            "--body-file",
            str(body_file),
            "--connections",
            str(args.connections),
            "--duration",
            f"{seconds:g}",
            "--client",
            args.python_client,
        ]
    cpu_before = process_cpu_seconds(target.proc.pid)
    own_before = cpu_seconds_without_signers(target.proc.pid)
    proc = spawn(cmd, env=env, capture=True)
    try:
        time.sleep(seconds / 2)  # the connections are all open by now
        spread = connections_per_worker(target.proc.pid, target.port)
        out, _ = proc.communicate(timeout=seconds + 60)
    finally:
        stop(proc)
    cpu_after = process_cpu_seconds(target.proc.pid)
    own_after = cpu_seconds_without_signers(target.proc.pid)
    for line in out.decode(errors="replace").splitlines():
        if line.startswith("BENCH_RESULT "):
            result: dict[str, Any] = json.loads(line[len("BENCH_RESULT ") :])
            result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
            if cpu_before is not None and cpu_after is not None and result["requests"]:
                result["cpu_us"] = (cpu_after - cpu_before) * 1e6 / result["requests"]
            if own_before is not None and own_after is not None and result["requests"]:
                result["own_cpu_us"] = (own_after - own_before) * 1e6 / result["requests"]
            if sum(spread):  # a supervisor's workers
                result["connections_per_worker"] = spread
            return result
    raise SystemExit(f"load generator printed no result (exit {proc.returncode}):\n{out.decode()}")
