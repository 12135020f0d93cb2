"""``/metrics`` of several processes: two ``paysign serve`` processes writing to one
``PROMETHEUS_MULTIPROC_DIR``, each answering with the sum of both."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import ServeProcess, ok_json, paysign, signature_body
from paysign import metrics

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
TESTNET = "eip155:84532"


def counts(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200, response.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def signed(samples: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> float:
    key = ("paysign_signatures_total", frozenset({"network": TESTNET, "sandbox": "false"}.items()))
    return samples.get(key, 0.0)


def refused(samples: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> float:
    key = ("paysign_signing_refusals_total", frozenset({"problem": "unauthorized"}.items()))
    return samples.get(key, 0.0)


@pytest.mark.slow
@SQLITE_ONLY
def test_every_process_answers_with_the_sum_of_all(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    email = "metrics@example.com"
    ok_json(
        paysign(env, "admin", "create-account", "--email", email, "--password", "long enough pass")
    )
    key = ok_json(paysign(env, "admin", "issue-key", "--email", email))["apiKey"]
    ok_json(
        paysign(env, "admin", "approve-seller", "--email", email, "--seller", "api.example.com")
    )
    directory = tmp_path / "prometheus"
    directory.mkdir()
    env = {**env, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    headers = {"Authorization": f"Bearer {key}"}

    first = ServeProcess(env)
    with first as first_url:
        second = ServeProcess(env)
        with second as second_url:
            for url, times in ((first_url, 2), (second_url, 3)):
                for _ in range(times):
                    answer = httpx.post(
                        f"{url}/wallets/signatures", json=signature_body(), headers=headers
                    )
                    assert answer.status_code == 200, answer.text
            bad = {"Authorization": "Bearer psk_" + "x" * 43}
            httpx.post(f"{second_url}/wallets/signatures", json=signature_body(), headers=bad)
            both = [counts(first_url), counts(second_url)]
            assert [(signed(s), refused(s)) for s in both] == [(5, 1), (5, 1)]
            files = {path.name for path in directory.iterdir()}
            for pid in (first.proc.pid, second.proc.pid):
                assert f"counter_{pid}.db" in files and f"histogram_{pid}.db" in files
        # The supervisor's call when a worker exits: what it counted stays in the sums.
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
        metrics.worker_exited(second.proc.pid)
        after = counts(first_url)
        assert (signed(after), refused(after)) == (5, 1)
