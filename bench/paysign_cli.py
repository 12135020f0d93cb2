"""The ``paysign`` command as the benchmark runs it: its argv, its environment, ``admin``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from bench.processes import CHILDREN, spawn


def paysign_cmd() -> list[str]:
    script = Path(sys.executable).parent / "paysign"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from paysign.cli import main; main()"]


def paysign_env(data_dir: Path, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env["PAYSIGN_DATA_DIR"] = str(data_dir)  # also where the master key file goes
    # The reconciler is a background job, not the signing path: parked, so that it does not
    # start working through the benchmark's own (sandbox) signatures in the middle of a run.
    env["PAYSIGN_RECONCILE_INTERVAL_SECONDS"] = str(7 * 86_400)
    if database_url is not None:
        env["PAYSIGN_DATABASE_URL"] = database_url
    return env


def admin(env: dict[str, str], *argv: str) -> dict[str, Any]:
    """``paysign admin ARGV...``: the JSON document it prints."""
    proc = spawn([*paysign_cmd(), "admin", *argv], env=env, capture=True)
    out, _ = proc.communicate(timeout=120)
    CHILDREN.remove(proc)
    if proc.returncode != 0:
        raise SystemExit(f"paysign admin {argv[0]} failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result


def admin_help(env: dict[str, str]) -> bytes:
    proc = spawn([*paysign_cmd(), "admin", "--help"], env=env, capture=True)
    help_text, _ = proc.communicate(timeout=60)
    CHILDREN.remove(proc)
    return help_text
