"""bench/app_instructions.py: its driver signs every request, or says it did not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "app_instructions.py"


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_driver_signs_every_request_of_a_bench_account() -> None:
    done = run("--check", "--concurrency", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "signed all 128 requests" in done.stdout


def test_the_driver_fails_when_a_request_is_not_signed(tmp_path: Path) -> None:
    # A key nobody issued: every answer is 401, and a count of such requests would mean
    # nothing.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env["PAYSIGN_DATA_DIR"] = str(tmp_path / "var")
    env["BENCH_API_KEY"] = "psk_" + "x" * 43
    done = run("--drive", "--counted-rounds", "1", env=env)
    assert done.returncode != 0
    assert "not every request was signed: {401:" in done.stderr


def test_the_count_is_callgrinds_last_total() -> None:
    # The script's doctests (instructions_counted): bench/ is not a test path.
    done = subprocess.run(
        [sys.executable, "-m", "doctest", "-v", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout and "9907470" in done.stdout
