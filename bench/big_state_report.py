"""The big state's report: its runs, ratios to the empty-policy baseline, store timings."""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field
from typing import Any

from bench.ledger import LEDGER_DAYS, LEDGER_TX_ROWS
from bench.report import fmt_int, goal, ms

WITHIN = 0.10  # the acceptance check: big state within 10% of the empty-policy figure


@dataclass
class BigRun:
    label: str
    role: str  # "empty" (baseline, before the load), "big", "empty-after"
    rules: int
    ledger: int
    result: dict[str, Any]


@dataclass
class BigReport:
    backend: str
    runs: list[BigRun] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    plan: str = ""


def _median(runs: list[BigRun], key: str) -> float:
    return statistics.median(float(r.result[key]) for r in runs)


def report_big_state(report: BigReport, args: argparse.Namespace, loadgen_desc: str) -> bool:
    backend = {"sqlite": "SQLite (embedded default)", "postgres": "PostgreSQL"}[report.backend]
    ld = report.load
    print(
        f"\n### Big state, {backend}: {args.big_rules:,} policy rules and a "
        f"{args.big_ledger:,}-signature ledger ({loadgen_desc}, {args.connections} connections, "
        f"{args.duration:g} s per run)\n"
    )
    print(
        f"* Policy: `paysign admin set-policy --file` with {ld['allow']:,} allow + "
        f"{ld['deny']:,} deny rules took **{ld['policy_s']:.1f} s** (CLI start and the "
        "printed document included)."
    )
    print(
        f"* Ledger: {args.big_ledger:,} rows over {args.big_accounts:,} other accounts "
        f"+ the benchmarked one ({ld['own_rows']:,} rows), past {LEDGER_DAYS} days, "
        f"{'COPY' if report.backend == 'postgres' else 'executemany'} in "
        f"{LEDGER_TX_ROWS:,}-row transactions: **{ld['ledger_s']:.1f} s** "
        f"({args.big_ledger / ld['ledger_s']:,.0f} rows/s), then {ld['finish_s']:.1f} s "
        f"for {ld['finish_how']}. {ld['size']}; {ld['total_rows']:,} rows in `signatures`."
    )
    print(f"* Plan of the rules lookup for A: `{report.plan}`")
    base = [r for r in report.runs if r.role == "empty"]
    base_rps, base_p50 = _median(base, "rps"), _median(base, "p50_us")
    base_cpu = statistics.median(r.result.get("cpu_us", float("nan")) for r in base)
    print(
        "\n| # | run | rules (account) | rows in `signatures` | req/s | p50 | p99 "
        "| server CPU / req | req/s ÷ baseline | p50 ÷ baseline | non-2xx | load avg |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, r in enumerate(report.runs, 1):
        res = r.result
        cpu = f"{res['cpu_us']:.0f} µs" if "cpu_us" in res else "n/a"
        print(
            f"| {i} | {r.label} | {r.rules:,} | {r.ledger:,} | {fmt_int(res['rps'])} | "
            f"{ms(res['p50_us'])} | {ms(res['p99_us'])} | {cpu} | {res['rps'] / base_rps:.2f} | "
            f"{res['p50_us'] / base_p50:.2f} | {res['non2xx']} | {res['load1']:.1f} |"
        )

    def ratio_row(what: str, num: list[BigRun], den: list[BigRun], check: bool) -> bool:
        rps = _median(num, "rps") / _median(den, "rps")
        p50 = _median(num, "p50_us") / _median(den, "p50_us")
        cpu_num = statistics.median(r.result.get("cpu_us", float("nan")) for r in num)
        cpu_den = statistics.median(r.result.get("cpu_us", float("nan")) for r in den)
        ok = rps >= 1 - WITHIN
        verdict = f"{'pass' if ok else 'FAIL'} {goal(ok)}" if check else "(diagnostic)"
        print(f"| {what} | {rps:.3f} | {p50:.3f} | {cpu_num / cpu_den:.3f} | {verdict} |")
        return ok

    big = [r for r in report.runs if r.role == "big"]
    after = [r for r in report.runs if r.role == "empty-after"]
    print(
        f"\n| comparison (medians) | req/s ratio | p50 ratio | CPU/req ratio "
        f"| req/s within {WITHIN:.0%} |"
    )
    print("|---|---:|---:|---:|---|")
    ok = ratio_row("**big state (A) ÷ empty-policy baseline (A before the load)**", big, base, True)
    ratio_row(
        "big state (A) ÷ empty policy on the big ledger (B): the rules' cost", big, after, True
    )
    ratio_row(
        "empty policy on the big ledger (B) ÷ baseline: the ledger size's cost", after, base, True
    )
    print(f"\nBaseline: {fmt_int(base_rps)} req/s, p50 {ms(base_p50)}, CPU/req {base_cpu:.0f} µs.")

    print(
        "\nSigning store in process, same database, median µs per call (the statements in a "
        "rolled-back transaction; `whole` = a committed transaction: key, rules, reservation, "
        "insert, no signing):\n"
    )
    cols = list(report.timings)
    print("| statement | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    names = {
        "key_holder": "`key_holder` (key + wallet + policy)",
        "grants": "`grants` (candidate rules)",
        "grant_rows": "rows `grants` returns",
        "insert": "`insert_signature`",
        "whole": "`whole` (committed)",
    }
    for key, label in names.items():
        cells = []
        for c in cols:
            v = report.timings[c][key]
            cells.append(f"{v:.0f}" if key == "grant_rows" else f"{v:.1f} µs")
        print(f"| {label} | " + " | ".join(cells) + " |")
    return ok
