"""Where a server's CPU goes, by library: ``perf record`` on a process under load.

``bench/sign.py --cpu-breakdown SECONDS`` samples the ceiling and our SQLite server in turn
(``perf record -F 999``, no call graphs) while the load generator runs, and turns each
library's share of the samples into microseconds per request with the CPU time the run
measured. Side by side, the two columns show what our endpoint adds to the framework's own
cost, and how much of that is Python at all.

    >>> classify("[kernel.kallsyms]"), classify("libpython3.11.so.1.0")
    ('kernel (TCP, syscalls)', 'CPython interpreter')
    >>> classify("_libsecp256k1.cpython-311-x86_64-linux-gnu.so")
    'libsecp256k1 (the ECDSA signature)'
    >>> parse_report("  46.18%  libpython3.11.so.1.0\\n  16.81%  [kernel.kallsyms]\\n")
    {'libpython3.11.so.1.0': 46.18, '[kernel.kallsyms]': 16.81}
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

#: Library groups, in the order of the table; the first pattern that matches a library wins.
GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("kernel (TCP, syscalls)", ("[kernel",)),
    ("CPython interpreter", ("libpython", "python3")),
    ("libsecp256k1 (the ECDSA signature)", ("libsecp256k1",)),
    ("SQLite", ("sqlite",)),
    ("libc (malloc, memcpy)", ("libc.so", "libc-", "ld-linux", "libm.so")),
    ("uvloop, httptools, asyncio", ("loop.cpython", "parser.cpython", "_asyncio")),
]
OTHER = "other native (orjson, keccak, AES-GCM, cffi, …)"

_LINE = re.compile(r"^\s*([0-9.]+)%\s+(\S.*?)\s*$")


def classify(library: str) -> str:
    for group, patterns in GROUPS:
        if any(pattern in library for pattern in patterns):
            return group
    return OTHER


def parse_report(text: str) -> dict[str, float]:
    """``perf report --sort dso --stdio`` output -> {library: percent of samples}."""
    shares: dict[str, float] = {}
    for line in text.splitlines():
        match = _LINE.match(line)  # "  46.18%  libpython3.11.so.1.0"; not the '#' comments
        if match:
            shares[match.group(2)] = shares.get(match.group(2), 0.0) + float(match.group(1))
    return shares


def by_group(shares: dict[str, float]) -> dict[str, float]:
    """{group: percent}, every group present (0 when no library of it was sampled)."""
    groups = {name: 0.0 for name, _ in GROUPS} | {OTHER: 0.0}
    for library, percent in shares.items():
        groups[classify(library)] += percent
    return groups


def record(
    pids: Sequence[int],
    output: Path,
    run_load: Callable[[], dict[str, object]],
    spawn: Callable[..., subprocess.Popen[bytes]],
    stop: Callable[[subprocess.Popen[bytes]], None],
    log_path: Path,
) -> tuple[dict[str, float], dict[str, object]] | str:
    """Sample ``pids`` (a server and its signer process) while ``run_load()`` runs:
    ({group: percent}, the load's result), or why not."""
    perf = shutil.which("perf")
    if perf is None:
        return "perf is not installed (apt-get install -y linux-perf)"
    recorder = spawn(
        [perf, "record", "-F", "999", "-p", ",".join(map(str, pids)), "-o", str(output), "--quiet"],
        log_path=log_path,
    )
    try:
        result = run_load()
    finally:
        recorder.send_signal(signal.SIGINT)  # perf writes its file and exits
        try:
            recorder.wait(timeout=30)
        finally:
            stop(recorder)
    if not output.exists():
        said = log_path.read_text(errors="replace").strip() if log_path.exists() else ""
        return f"perf record wrote nothing ({said[-300:] or 'it printed nothing'})"
    report = subprocess.run(
        [perf, "report", "-i", str(output), "--sort", "dso", "--stdio", "--no-children"],
        capture_output=True,
        text=True,
        check=False,
    )
    shares = parse_report(report.stdout)
    if not shares:
        return f"perf report found no samples: {report.stderr.strip()[:200]}"
    return by_group(shares), result


def table(columns: list[tuple[str, dict[str, float], float]]) -> str:
    """Markdown: one row per group, µs per request for each (name, {group: %}, cpu µs/req)
    column, and the difference of the last column from the first."""
    names = [name for name, _, _ in columns]
    out = [
        "| where the CPU goes | " + " | ".join(f"{n} µs/req" for n in names) + " | difference |",
        "|---|" + "---:|" * (len(columns) + 1),
    ]
    for group in [name for name, _ in GROUPS] + [OTHER]:
        cells = [percent[group] / 100 * cpu for _, percent, cpu in columns]
        out.append(
            f"| {group} | "
            + " | ".join(f"{c:.1f}" for c in cells)
            + f" | {cells[-1] - cells[0]:+.1f} |"
        )
    totals = [cpu for _, _, cpu in columns]
    out.append(
        "| **total (server CPU / request)** | "
        + " | ".join(f"**{t:.1f}**" for t in totals)
        + f" | **{totals[-1] - totals[0]:+.1f}** |"
    )
    return "\n".join(out)
