"""The report's markdown tables of the default run: in process, HTTP, sequential latency."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time
from pathlib import Path

from bench.accounts import POLICY_NOTE
from bench.in_process import Timing
from bench.servers import Target


def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def ms(us: float) -> str:
    return f"{us / 1000:.2f} ms"


def goal(ok: bool) -> str:
    return "✅" if ok else "❌"


def server_label(name: str, ours: str) -> str:
    """A server of the run by its target name: ``sqlite``, ``postgres-2``, ``ceiling``..."""
    if name == "ceiling":
        return "bare Starlette JSON endpoint (ceiling, `bench/ceiling_app.py`)"
    if name == "sqlite-inline":
        return f"{ours}, SQLite, signing on the event loop (`PAYSIGN_SIGNER_PROCESS=false`)"
    database, _, workers = name.partition("-")
    where = {"sqlite": "SQLite (embedded default)", "postgres": "PostgreSQL"}[database]
    if workers.endswith("-accounts"):
        return f"{ours}, {where}, the load over {workers.split('-')[0]} accounts"
    if workers:
        return f"{ours}, {where}, `paysign serve --workers {workers}`"
    return f"{ours}, {where}"


def report_in_process(timings: list[Timing], pinning: str) -> dict[str, float]:
    by = {t.label: t.median_us for t in timings}
    print(
        f"\n### 1. In-process signing cost "
        f"(median of {len(timings[0].samples_us)} repeats, {pinning})\n"
    )
    print("| path | µs / signature | signatures / s | spread (min-max µs) |")
    print("|---|---:|---:|---:|")
    for t in timings:
        print(
            f"| {t.label} {t.what} | {t.median_us:.1f} | {fmt_int(1e6 / t.median_us)} | "
            f"{min(t.samples_us):.1f}-{max(t.samples_us):.1f} |"
        )
    full, sign_only, floor = by["(b)"], by["(b')"], by["(c)"]
    print("\n| ratio | value | goal |")
    print("|---|---:|---|")
    print(
        f"| ours signing only / floor = (b')/(c) | {sign_only / floor:.2f}x | "
        f"≤ 1.5x {goal(sign_only / floor <= 1.5)} |"
    )
    print(
        f"| ours full path / floor = (b)/(c) | {full / floor:.2f}x | "
        f"≤ 1.5x {goal(full / floor <= 1.5)} |"
    )
    print(f"| eth-account / ours full = (a)/(b) | {by['(a)'] / full:.1f}x | |")
    print(f"| eth-account / ours signing only = (a)/(b') | {by['(a)'] / sign_only:.1f}x | |")
    print(f"| x402 SDK local / ours full = (d)/(b) | {by['(d)'] / full:.1f}x | |")
    return by


def report_http(
    targets: list[Target], ceiling: Target, loadgen_desc: str, args: argparse.Namespace
) -> None:
    rounds = len(ceiling.runs)
    print(
        f"\n### 2. HTTP throughput on 127.0.0.1 ({loadgen_desc}, {args.connections} connections, "
        f"{args.duration:g} s per run, {rounds} alternating rounds, median)\n"
    )
    print(
        "| server | req/s | p50 | p99 | server CPU / req (signer process included) | non-2xx "
        "| socket errors / timeouts "
        "| req/s per round | share of ceiling |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ceiling_rps = statistics.median(r["rps"] for r in ceiling.runs)
    for t in [ceiling, *targets]:
        rps = statistics.median(r["rps"] for r in t.runs)
        p50 = statistics.median(r["p50_us"] for r in t.runs)
        p99 = statistics.median(r["p99_us"] for r in t.runs)
        non2xx = sum(r["non2xx"] for r in t.runs)
        sock = sum(r["socket_errors"] for r in t.runs)
        tmo = sum(r["timeouts"] for r in t.runs)
        per_round = " / ".join(fmt_int(r["rps"]) for r in t.runs)
        share = rps / ceiling_rps
        share_text = "100%" if t is ceiling else f"{100 * share:.0f}%"
        label = server_label(t.name, "ours `POST /wallets/signatures`")
        cpu = [r["cpu_us"] for r in t.runs if "cpu_us" in r]
        own = [r["own_cpu_us"] for r in t.runs if "own_cpu_us" in r]
        cpu_text = f"{statistics.median(cpu):.0f} µs" if cpu else "n/a"
        if cpu and own and statistics.median(cpu) - statistics.median(own) >= 0.5:
            cpu_text += f" ({statistics.median(own):.0f} µs without it)"
        print(
            f"| {label} | {fmt_int(rps)} | {ms(p50)} | {ms(p99)} | {cpu_text} | {non2xx} | "
            f"{sock} / {tmo} | {per_round} | {share_text} |"
        )
    spreads = [
        (t.name, [r["connections_per_worker"] for r in t.runs if "connections_per_worker" in r])
        for t in targets
    ]
    for name, spread in spreads:
        if spread:
            rounds_text = ", ".join("/".join(map(str, s)) for s in spread)
            label = server_label(name, "paysign")
            print(
                f"\nConnections each worker held halfway through each round ({label}): "
                f"{rounds_text}. A worker keeps every connection it is handed."
            )
    for note in POLICY_NOTE:
        print(f"\nOur endpoint ran with the {note}.")
    accounts = len(targets[0].load_keys) if targets else 1
    if accounts > 1:
        print(f"\nThe load paid from {accounts} accounts, each request the next one's key.")
    many = max((len(t.load_keys) for t in targets), default=1)
    if many > accounts:
        print(
            f"\nThe rows over {many} accounts paid from each in turn, each request the next "
            "one's key: a batch's requests come from different payers, as in production."
        )


def report_sequential(
    seq: dict[str, dict[str, float]], httpx_p50: float | None, by: dict[str, float] | None, n: int
) -> None:
    print(
        f"\n### 3. Single-request latency (sequential, 1 keep-alive connection, {n} requests;"
        " the servers take turns of 50)\n"
    )
    print("| what | p50 | p99 |")
    print("|---|---:|---:|")
    for name, r in seq.items():
        label = server_label(name, "ours over HTTP") + " (`http.client`)"
        print(f"| {label} | {r['p50']:.0f} µs | {r['p99']:.0f} µs |")
    if httpx_p50 is not None:
        print(
            "| ours over HTTP, SQLite (`httpx.Client`, what an agent would use) | "
            f"{httpx_p50:.0f} µs | |"
        )
    if by is not None:
        print(f"| (d) x402 SDK signing locally, in process (one core) | {by['(d)']:.0f} µs | |")
        parse_too = by["(d')"]
        print(f"| (d') the same plus parsing the 402 body | {parse_too:.0f} µs | |")
        ours = seq["sqlite"]["p50"]
        verdict = "faster" if ours < by["(d)"] else "slower"
        print(
            f"\nSigning over HTTP (p50 {ours:.0f} µs) is {by['(d)'] / ours:.2f}x the speed of "
            f"signing locally with the SDK ({by['(d)']:.0f} µs): HTTP is **{verdict}**."
        )


def machine_line(loadgen_desc: str) -> str:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPU ({cpu}), "
        f"Python {platform.python_version()}, load generator: {loadgen_desc}, "
        f"1-min load average at start {load1:.2f}"
    )
