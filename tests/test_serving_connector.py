"""``paysign serve --workers N`` runs the connector without MCP sessions unless the operator
chose: a session would live in one worker while the next request may reach another."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from paysign.config import Settings
from paysign.serving.command import worker_environment

STATELESS = "PAYSIGN_CONNECTOR_STATELESS"


@pytest.fixture
def metrics_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A configured directory: worker_environment then leaves the process's environment alone.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))


def test_workers_run_the_connector_stateless_and_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metrics_dir: None
) -> None:
    monkeypatch.delenv(STATELESS, raising=False)
    with capture_logs() as logs:
        env = worker_environment(Settings(data_dir=tmp_path / "var"))
    assert env[STATELESS] == "true"
    monkeypatch.setenv(STATELESS, env[STATELESS])
    assert Settings().connector_stateless is True  # what a worker reads
    events = [entry for entry in logs if entry["event"] == "connector_stateless"]
    assert len(events) == 1 and events[0]["log_level"] == "info"
    assert "stateless under several workers" in events[0]["reason"]


@pytest.mark.parametrize("name", [STATELESS, STATELESS.lower()])
def test_an_operators_choice_is_kept(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metrics_dir: None
) -> None:
    monkeypatch.delenv(STATELESS, raising=False)
    monkeypatch.setenv(name, "false")
    with capture_logs() as logs:
        env = worker_environment(Settings(data_dir=tmp_path / "var"))
    assert env[name] == "false" and (name == STATELESS or STATELESS not in env)
    assert [entry["event"] for entry in logs] == ["connector_sessions_in_one_worker"]
    assert logs[0]["log_level"] == "warning"

    monkeypatch.setenv(name, "true")
    with capture_logs() as logs:
        env = worker_environment(Settings(data_dir=tmp_path / "var"))
    assert env[name] == "true" and logs == []
