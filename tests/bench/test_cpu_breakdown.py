"""bench/cpu_breakdown.py: perf's per-library report turned into µs per request."""

from __future__ import annotations

import doctest
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

# The head of a real `perf report --sort dso --stdio --no-children` of our server under load.
REPORT = """\
# To display the perf.data header info, please use --header/--header-only options.
#
# Total Lost Samples: 0
#
# Samples: 6K of event 'cpu-clock:ppp'
# Event count (approx.): 6020020014
#
# Overhead  Shared Object
# ........  .............................................
#
    46.18%  libpython3.11.so.1.0
    16.81%  _libsecp256k1.cpython-311-x86_64-linux-gnu.so
    16.36%  [kernel.kallsyms]
     6.43%  libc.so.6
     5.97%  libsqlite3.so.0.8.6
     1.75%  loop.cpython-311-x86_64-linux-gnu.so
     1.36%  orjson.cpython-311-x86_64-linux-gnu.so
     0.85%  parser.cpython-311-x86_64-linux-gnu.so
     0.33%  _sqlite3.cpython-311-x86_64-linux-gnu.so
     0.08%  [vdso]


#
# (Tip: ...)
#
"""


@pytest.fixture(scope="module")
def breakdown() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cpu_breakdown", BENCH / "cpu_breakdown.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_its_examples_hold(breakdown: ModuleType) -> None:
    assert doctest.testmod(breakdown).failed == 0


def test_a_report_is_read_library_by_library(breakdown: ModuleType) -> None:
    shares = breakdown.parse_report(REPORT)
    assert shares["libpython3.11.so.1.0"] == 46.18
    assert shares["[vdso]"] == 0.08
    assert len(shares) == 10  # headers, blank lines and tips are not libraries


def test_libraries_are_grouped_and_every_group_is_present(breakdown: ModuleType) -> None:
    groups = breakdown.by_group(breakdown.parse_report(REPORT))
    assert groups["SQLite"] == pytest.approx(5.97 + 0.33)
    assert groups["uvloop, httptools, asyncio"] == pytest.approx(1.75 + 0.85)
    assert groups[breakdown.OTHER] == pytest.approx(1.36 + 0.08)
    assert sum(groups.values()) == pytest.approx(96.12)
    assert breakdown.by_group({})["libsecp256k1 (the ECDSA signature)"] == 0.0


def test_the_table_turns_shares_into_microseconds_per_request(breakdown: ModuleType) -> None:
    ours = breakdown.by_group(breakdown.parse_report(REPORT))
    ceiling = breakdown.by_group({"[kernel.kallsyms]": 50.0, "libpython3.11.so.1.0": 50.0})
    text = breakdown.table([("ceiling", ceiling, 40.0), ("ours", ours, 200.0)])
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()}
    # kernel: 50% of 40 µs against 16.36% of 200 µs
    assert rows["kernel (TCP, syscalls)"].endswith("| 20.0 | 32.7 | +12.7 |")
    assert rows["libsecp256k1 (the ECDSA signature)"].endswith("| 0.0 | 33.6 | +33.6 |")
    total = rows["**total (server CPU / request)**"]
    assert total.endswith("| **40.0** | **200.0** | **+160.0** |")


def _spawn(cmd: list[str], *, log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=log)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _load_of(seconds: float) -> Callable[[], dict[str, object]]:
    def run_load() -> dict[str, object]:
        time.sleep(seconds)
        return {"cpu_us": 1.0}

    return run_load


def test_a_perf_that_records_nothing_says_why(breakdown: ModuleType, tmp_path: Path) -> None:
    fake_perf = tmp_path / "perf"
    fake_perf.write_text("#!/bin/sh\necho 'no access to perf events' >&2\n")
    fake_perf.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(tmp_path), prepend=":")
        got = breakdown.record(
            [os.getpid()],
            tmp_path / "perf.data",
            _load_of(0.5),  # the fake perf has exited long before
            _spawn,
            _stop,
            tmp_path / "perf.log",
        )
    assert got == "perf record wrote nothing (no access to perf events)"


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_perf_samples_every_process_given(breakdown: ModuleType, tmp_path: Path) -> None:
    python = subprocess.Popen([sys.executable, "-c", "while True: sum(range(1000))"])
    shell = subprocess.Popen(["sh", "-c", "while :; do :; done"])  # no Python in it
    try:
        got = breakdown.record(
            [python.pid, shell.pid],
            tmp_path / "perf.data",
            _load_of(1.5),
            _spawn,
            _stop,
            tmp_path / "perf.log",
        )
    finally:
        _stop(python)
        _stop(shell)
    if isinstance(got, str) and ("no samples" in got or "wrote nothing" in got):
        pytest.skip(f"perf cannot sample here: {got}")
    assert not isinstance(got, str), got
    groups, result = got
    assert result == {"cpu_us": 1.0}
    # Two busy processes, one of them Python: neither is left out.
    assert 20 < groups["CPython interpreter"] < 80
    assert sum(groups.values()) - groups["CPython interpreter"] > 20
