"""bench/one_write.py: both protocols serve the ceiling under load, and the table says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "one_write.py"
X = "\N{MULTIPLICATION SIGN}"


def test_a_short_run_reports_both_protocols_with_their_cpu_per_request() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "1", "--duration", "1", "--warmup", "0.5"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.strip("|").split("|") for line in done.stdout.splitlines() if line[:2] == "| "]
    header, *servers = [[cell.strip() for cell in row] for row in rows]
    assert header[:6] == ["protocol", "req/s", "p99", "server CPU / req", "user", "system"]
    assert [row[0] for row in servers] == ["uvicorn's protocol", "OneWriteProtocol"]
    for row in servers:
        cpu, user, system = (float(cell.removesuffix(" µs")) for cell in row[3:6])
        assert cpu > 0 and user > 0 and system >= 0
    assert servers[0][-1] == f"1.000{X}"
