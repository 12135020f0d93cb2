"""What ``paysign serve --workers N`` sets up before it starts its workers: the workers'
environment (the address, a fresh private metrics directory), the listening socket (a port in
use is a clear error), the check of PostgreSQL's connection limit."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import NOT_DURABLE_URL_OPTION, PAYSIGN, ServeProcess
from paysign.bootstrap import build_runtime
from paysign.config import Settings
from paysign.serving.command import (
    METRICS_DIR_NAME,
    connections_per_worker,
    warn_about_connections,
    worker_environment,
)
from paysign.serving.process import StopSignals
from paysign.serving.supervisor import Supervisor, Worker, restart_delay


def test_workers_get_the_address_and_a_fresh_private_metrics_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recorded, then removed: the variable worker_environment sets is undone after the test.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    settings = Settings(data_dir=tmp_path / "var", host="127.0.0.1", port=9123)
    stale = tmp_path / "var" / METRICS_DIR_NAME
    stale.mkdir(parents=True)
    (stale / "counter_4242.db").write_bytes(b"a dead worker's counts")

    env = worker_environment(settings)

    assert env["PAYSIGN_HOST"] == "127.0.0.1" and env["PAYSIGN_PORT"] == "9123"
    metrics_dir = Path(env["PROMETHEUS_MULTIPROC_DIR"])
    assert metrics_dir == stale
    assert list(metrics_dir.iterdir()) == []
    assert stat.S_IMODE(metrics_dir.stat().st_mode) == 0o700
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(metrics_dir)  # the supervisor's too


def test_a_configured_metrics_dir_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep").write_text("x")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(mine))
    env = worker_environment(Settings(data_dir=tmp_path / "var"))
    assert env["PROMETHEUS_MULTIPROC_DIR"] == str(mine)
    assert (mine / "keep").exists()
    assert not (tmp_path / "var" / METRICS_DIR_NAME).exists()


def test_a_port_in_use_is_a_clear_error_before_anything_starts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env["PAYSIGN_DATA_DIR"] = str(tmp_path / "var")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [PAYSIGN, "serve", "--port", str(port), "--workers", "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "var" / "devchain").exists()  # failed before the dev chain started


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_too_many_connections_for_the_server_are_warned_about(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "var", database_url=database_url)
    runtime = build_runtime(settings)
    try:
        with runtime.db.read() as conn:
            limit = int(conn.exec_driver_sql("SHOW max_connections").scalar_one())
        per_worker = connections_per_worker(settings)
        assert per_worker == 8 + 4 + 8
        fits = limit // per_worker
        assert warn_about_connections(runtime, fits) is False
        assert warn_about_connections(runtime, fits + 1) is True
    finally:
        runtime.db.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_database_whose_crash_could_take_back_answered_signatures_is_warned_about_at_start(
    database_url: str, tmp_path: Path, dev_chain: Any
) -> None:
    def warnings_at_start(url: str, data_dir: str) -> list[dict[str, Any]]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
        env.update(
            PAYSIGN_DATA_DIR=str(tmp_path / data_dir),
            PAYSIGN_TESTNET_RPC_URL=dev_chain.rpc_url,
            PAYSIGN_DATABASE_URL=url,
        )
        server = ServeProcess(env)
        with server as served:
            assert httpx.get(f"{served}/readyz", timeout=5).status_code == 200  # it serves
            lines = server.output().splitlines()
        return [json.loads(line) for line in lines if b'"database_not_durable"' in line]

    assert warnings_at_start(database_url, "durable") == []
    (warned,) = warnings_at_start(database_url + NOT_DURABLE_URL_OPTION, "not-durable")
    assert warned["level"] == "warning"
    assert warned["settings"] == "fsync = on, synchronous_commit = off, full_page_writes = on"
    assert warned["losses"][0].startswith("synchronous_commit = off: a crash of the database")
    assert warned["see"] == "docs/deploy.md, Durability"


def test_restart_delays_double_up_to_30_seconds() -> None:
    assert [restart_delay(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


class RecordingSupervisor(Supervisor):
    """Stops itself once ``limit`` workers were started."""

    limit = 3

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.started: list[float] = []

    def _spawn(self, slot: int, generation: int) -> Worker:
        worker = super()._spawn(slot, generation)
        self.started.append(time.monotonic())
        if len(self.started) == self.limit:
            self.stop.requested = True
        return worker


def test_a_crash_looping_worker_is_started_again_ever_more_slowly() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        crashing = (sys.executable, "-c", "raise SystemExit(3)")
        supervisor = RecordingSupervisor(
            1, listener, dict(os.environ), StopSignals(), command=crashing
        )
        assert supervisor.run() == 0
    assert len(supervisor.started) == 3
    assert supervisor.slots[0].failures == 2
    first_gap = supervisor.started[1] - supervisor.started[0]
    second_gap = supervisor.started[2] - supervisor.started[1]
    assert first_gap >= restart_delay(1) and second_gap >= restart_delay(2)
    assert supervisor.workers == []  # the last one stopped and reaped
