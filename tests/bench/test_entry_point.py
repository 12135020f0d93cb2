"""``python bench/sign.py`` still runs as a script, wherever it is started from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_imports_the_bench_package(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "sign.py"), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--skip-in-process" in done.stdout
    assert "--big-state" in done.stdout
    # PostgreSQL and the multi-process runs are the default; a way out for machines without one.
    for flag in ("--no-postgres", "--sqlite-only", "--workers", "--no-multi-sqlite"):
        assert flag in done.stdout


def test_no_bench_module_outgrows_one_job() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "bench").glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 400} == {}
