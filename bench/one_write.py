"""What writing a response in one piece saves: the bare Starlette ceiling served by uvicorn's
own protocol and by paysign's ``OneWriteProtocol``, in alternating rounds.

    .venv/bin/python bench/one_write.py                 # 5 rounds of 5 s each (~1 min)
    .venv/bin/python bench/one_write.py --rounds 9

uvicorn writes a response's head and its body with two ``send()`` system calls; paysign serve
writes a response of known length with one (``paysign.serving.one_write``). The ceiling app
does nothing else, so the difference is the protocol's alone. The server's CPU is read from
``/proc`` per request, user and system apart: the system time is where the second send went.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import shutil
import statistics
import tempfile
from typing import Any

from bench.cpu_time import own_cpu_split
from bench.http_load import load, pick_loadgen
from bench.processes import stop
from bench.progress import log
from bench.request import request_body_bytes
from bench.servers import start_ceiling
from bench.summary import TIMES

KINDS = {"uvicorn's protocol": False, "OneWriteProtocol": True}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (5)")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per run (5)")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds of load before (1)")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="wrk threads (1)")
    p.add_argument("--response-bytes", type=int, default=1400, help="the answer's size (1400)")
    p.add_argument("--loadgen", choices=["auto", "wrk", "python"], default="auto")
    p.add_argument("--python-client", choices=["raw", "httpx"], default="raw")
    return p.parse_args(argv)


def cpu_split(pid: int) -> tuple[float, float]:
    split = own_cpu_split(pid)
    if split is None:
        raise SystemExit("the server's CPU time is read from Linux's /proc, not found here")
    return split


def one_run(
    args: argparse.Namespace, workdir: Path, body: Path, loadgen: str, one_write: bool
) -> dict[str, Any]:
    target = start_ceiling(workdir, args.response_bytes, one_write=one_write)
    try:
        load(target, args, body, args.warmup, loadgen)
        user, system = cpu_split(target.proc.pid)
        result = load(target, args, body, args.duration, loadgen)
        user_after, system_after = cpu_split(target.proc.pid)
    finally:
        stop(target.proc)
    if result["non2xx"] or not result["requests"]:
        raise SystemExit(f"the ceiling did not answer every request 2xx: {result}")
    result["user_us"] = (user_after - user) * 1e6 / result["requests"]
    result["system_us"] = (system_after - system) * 1e6 / result["requests"]
    return result


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    loadgen = pick_loadgen(args.loadgen)
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    workdir = Path(tempfile.mkdtemp(prefix="paysign-one-write-"))
    try:
        body = workdir / "body.json"
        body.write_bytes(request_body_bytes())
        for round_no in range(1, args.rounds + 1):
            for kind, one_write in KINDS.items():
                run = one_run(args, workdir, body, loadgen, one_write)
                runs[kind].append(run)
                p99 = run["p99_us"] / 1000
                log(f"round {round_no} {kind}: {run['rps']:,.0f} req/s, p99 {p99:.2f} ms")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"### The ceiling app by protocol ({loadgen}, {args.connections} connections, "
        f"{args.rounds} alternating rounds of {args.duration:g} s, medians)\n"
    )
    print("| protocol | req/s | p99 | server CPU / req | user | system | req/s against uvicorn's |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    first = statistics.median(r["rps"] for r in runs["uvicorn's protocol"])
    for kind, kind_runs in runs.items():
        rps = statistics.median(r["rps"] for r in kind_runs)
        p99 = statistics.median(r["p99_us"] for r in kind_runs) / 1000
        cpu = statistics.median(r["cpu_us"] for r in kind_runs)
        user = statistics.median(r["user_us"] for r in kind_runs)
        system = statistics.median(r["system_us"] for r in kind_runs)
        print(
            f"| {kind} | {rps:,.0f} | {p99:.2f} ms | {cpu:.1f} µs | {user:.1f} µs | "
            f"{system:.1f} µs | {rps / first:.3f}{TIMES} |"
        )
    rounds = [
        f"{a['rps'] / b['rps']:.2f}"
        for a, b in zip(runs["OneWriteProtocol"], runs["uvicorn's protocol"], strict=True)
    ]
    print(f"\nOneWriteProtocol's req/s against uvicorn's, round by round: {', '.join(rounds)}")


if __name__ == "__main__":
    main()
