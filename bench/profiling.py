"""Profiles of a server under load: py-spy's hotspots, and perf's CPU by library."""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from bench import cpu_breakdown
from bench.cpu_time import signer_descendants
from bench.http_load import load
from bench.processes import spawn, stop, tail
from bench.progress import log
from bench.servers import Target

PROFILE_RATE = 250  # py-spy samples per second


def profile(
    target: Target, args: argparse.Namespace, body_file: Path, loadgen: str, workdir: Path
) -> str:
    """Sample our server with ``py-spy --gil`` while the load generator runs."""
    py_spy = args.py_spy or shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if shutil.which(py_spy) is None:
        return "_(profiling skipped: py-spy not found; pass --py-spy PATH)_"
    raw = workdir / "profile.txt"
    # --gil: only samples of the thread holding the GIL, i.e. where the interpreter's one core
    # goes (idle worker threads and lock waits would otherwise swamp the picture).
    spy = spawn(
        [
            py_spy,
            "record",
            "--pid",
            str(target.proc.pid),
            "--duration",
            f"{args.profile:g}",
            "--rate",
            str(PROFILE_RATE),
            "--gil",
            "--format",
            "raw",
            "--output",
            str(raw),
            "--nonblocking",
        ],
        log_path=workdir / "py-spy.log",
    )
    time.sleep(0.5)
    load(target, args, body_file, args.profile + 1, loadgen)
    try:
        spy.wait(timeout=30)
    finally:
        stop(spy)
    if not raw.exists():
        return f"_(py-spy produced nothing: {tail(workdir / 'py-spy.log', 5)})_"
    return summarise_profile(raw, args.profile_top, int(PROFILE_RATE * args.profile))


def breakdown(
    ceiling: Target,
    ours: Target,
    args: argparse.Namespace,
    body_file: Path,
    loadgen: str,
    workdir: Path,
) -> str:
    """``cpu_breakdown`` of the ceiling and our SQLite server, each under the same load."""
    columns: list[tuple[str, dict[str, float], float]] = []
    for target in (ceiling, ours):
        log(f"perf on {target.name} for {args.cpu_breakdown:g} s")
        got = cpu_breakdown.record(
            [target.proc.pid, *signer_descendants(target.proc.pid)],
            workdir / f"perf-{target.name}.data",
            functools.partial(load, target, args, body_file, args.cpu_breakdown, loadgen),
            spawn,
            stop,
            workdir / "perf.log",
        )
        if isinstance(got, str):
            return f"_(CPU breakdown skipped: {got})_"
        groups, result = got
        cpu_us = result.get("cpu_us")
        if not isinstance(cpu_us, float):
            return "_(CPU breakdown skipped: no CPU time for the server on this system)_"
        columns.append((target.name, groups, cpu_us))
    note = (
        "Each library's share of the samples times the server CPU per request of the same run "
        "(sampling slows the server a little; compare the columns, not these totals with the "
        "table above). The difference column is what our endpoint adds to the framework."
    )
    return cpu_breakdown.table(columns) + "\n\n" + note


def _frames(raw: Path) -> Iterator[tuple[list[str], int]]:
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield (
                [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))],
                int(count),
            )


def _frame_file(frame: str) -> str:
    # py-spy frames read "function (path/relative/to/sys.path/file.py:123)"
    return frame.rpartition(" (")[2].rstrip(")").rsplit(":", 1)[0]


def _package(frame: str) -> str:
    path = _frame_file(frame)
    if "/" in path:
        return path.split("/", 1)[0]
    return "stdlib" if path.endswith(".py") else path


def _function(frame: str) -> str:
    name, _, where = frame.rpartition(" (")
    return f"`{name}` ({where.rstrip(')').rsplit(':', 1)[0]})"


def summarise_profile(raw: Path, top: int, possible: int) -> str:
    """Collapsed stacks -> inclusive share of our own functions, leaf hotspots, packages."""
    own: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    samples = 0
    for frames, count in _frames(raw):
        if not frames:
            continue
        samples += count
        own[_function(frames[-1])] += count
        for name in {_function(f) for f in frames if _package(f) == "paysign"}:
            ours[name] += count
        packages[_package(frames[-1])] += count
    if not samples:
        return "_(no samples)_"

    def pct(n: int) -> str:
        return f"{100 * n / samples:.1f}"

    out = [
        f"{samples} samples with the GIL held, of about {possible} possible "
        f"(the GIL was held {100 * samples / max(1, possible):.0f}% of the time).",
        "",
        "Inclusive share of paysign's own functions:",
        "",
        "| % of GIL samples | paysign function (file) |",
        "|---:|---|",
    ]
    skip = ("paysign/cli/", "`<module>`")
    mine = [(k, n) for k, n in ours.most_common() if not any(x in k for x in skip)]
    out += [f"| {pct(n)} | {k} |" for k, n in mine[:top]]
    out += ["", "Leaf (self) hotspots:", "", "| % of GIL samples | function (file) |", "|---:|---|"]
    out += [f"| {pct(n)} | {k} |" for k, n in own.most_common(top)]
    by_package = ", ".join(f"{k} {pct(n)}%" for k, n in packages.most_common(10))
    out += ["", f"Self time by package: {by_package}"]
    return "\n".join(out)
