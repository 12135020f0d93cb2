"""``paysign serve --workers 2`` as real processes: one port answered by two workers, a burst of
keep-alive connections shared evenly, a killed worker replaced with no request failing but the
one it had taken, the reconciler in exactly one of them (the lease holder, taken over when it
dies), SIGHUP swapping the workers with no request refused, caps exact across the workers."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from conftest import ok_json, paysign, signature_body
from serving_support import Serve, alive, bench_module, children

pytestmark = pytest.mark.slow

AMOUNT = 100_000  # 0.1 USDC
K = 9  # the daily cap fits exactly K live payments


async def burst(url: str, key: str, live: int, sandbox: int) -> list[tuple[bool, int, str]]:
    """Every request at once on its own connection; (sandbox?, status, problem slug)."""
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one(is_sandbox: bool) -> tuple[bool, int, str]:
            extra = {"X-Sandbox-Mode": "true"} if is_sandbox else {}
            response = await client.post(
                f"{url}/wallets/signatures",
                json=signature_body(amount=str(AMOUNT)),
                headers=headers | extra,
            )
            slug = response.json().get("type", "").rsplit("/", 1)[-1]
            return is_sandbox, response.status_code, slug

        return await asyncio.gather(*(one(s) for s in [False] * live + [True] * sandbox))


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def sqlite_env(tmp_path: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    environment["PAYSIGN_DATA_DIR"] = str(tmp_path / "var")
    # The reconciler's lease taken over within seconds of its holder's death.
    environment["PAYSIGN_JOB_LEASE_SECONDS"] = "3"
    environment["PAYSIGN_RECONCILE_INTERVAL_SECONDS"] = "1"
    return environment


def api_key(env: dict[str, str], email: str) -> str:
    ok_json(
        paysign(env, "admin", "create-account", "--email", email, "--password", "pass phrase 1")
    )
    ok_json(
        paysign(env, "admin", "approve-seller", "--email", email, "--seller", "api.example.com")
    )
    return str(ok_json(paysign(env, "admin", "issue-key", "--email", email))["apiKey"])


def reconcile_holder_pid(data_dir: Path) -> int | None:
    with sqlite3.connect(data_dir / "paysign.db") as conn:
        row = conn.execute(
            "SELECT holder FROM job_leases WHERE name = 'reconcile' AND expires_at >= ?",
            (int(time.time()),),
        ).fetchone()
    return None if row is None else int(row[0].split(":")[1])


class Traffic:
    """Signature requests one after another, each on a new connection, until stopped."""

    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = url, key
        self.statuses: list[int] = []
        #: Each failed request: when it was sent (``time.monotonic()``), and why it failed.
        self.failures: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}", "X-Sandbox-Mode": "true"}
        while not self._stop.is_set():
            sent = time.monotonic()
            try:
                response = httpx.post(
                    f"{self.url}/wallets/signatures",
                    json=signature_body(),
                    headers=headers,
                    timeout=30,
                )
                self.statuses.append(response.status_code)
            except httpx.TransportError as exc:
                self.failures.append((sent, repr(exc)))

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def cluster(sqlite_env: dict[str, str]) -> Iterator[tuple[Serve, str, str]]:
    key = api_key(sqlite_env, "cluster@example.com")
    server = Serve(sqlite_env, "--workers", "2")
    with server as url:
        yield server, url, key


def test_a_burst_of_keep_alive_connections_is_shared_evenly(
    cluster: tuple[Serve, str, str],
) -> None:
    server, _, _ = cluster
    # Logged once the supervisor hands the worker connections.
    wait_for(lambda: server.output().count(b"worker_ready") == 2, "both workers ready")
    clients = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=10) for _ in range(16)]
    try:
        for client in clients:  # all open before the first request, as a pool opens them
            client.connect()
        for client in clients:
            client.request("GET", "/healthz")
            response = client.getresponse()
            response.read()
            assert response.status == 200
        # Each worker serves half: none left idle while the other holds every connection.
        cpu_time = bench_module("cpu_time")
        assert cpu_time.connections_per_worker(server.proc.pid, server.port) == [8, 8]
    finally:
        for client in clients:
            client.close()


def test_a_killed_worker_is_replaced_and_its_lease_taken_over(
    cluster: tuple[Serve, str, str], tmp_path: Path
) -> None:
    server, url, key = cluster
    supervisor = server.proc.pid
    workers = wait_for(lambda: len(children(supervisor)) == 2 and children(supervisor), "workers")
    assert isinstance(workers, list)
    holder = wait_for(lambda: reconcile_holder_pid(tmp_path / "var"), "the reconcile lease")
    assert isinstance(holder, int)
    assert holder in workers  # one worker runs the reconciler, not the supervisor

    with Traffic(url, key) as traffic:
        wait_for(lambda: len(traffic.statuses) >= 5, "answers")
        os.kill(holder, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_for(lambda: not alive(holder), "the holder's death")
        replaced = wait_for(
            lambda: len(now := children(supervisor)) == 2 and holder not in now and now,
            "a replacement worker",
        )
        assert isinstance(replaced, list)
        survivor = next(pid for pid in workers if pid != holder)
        assert survivor in replaced
        new_holder = wait_for(
            lambda: (pid := reconcile_holder_pid(tmp_path / "var")) not in (None, holder) and pid,
            "the lease taken over",
        )
        assert new_holder in replaced
        answered = len(traffic.statuses)
        wait_for(lambda: len(traffic.statuses) >= answered + 5, "answers after the restart")

    # A request the killed worker had already taken can get no answer from it (SIGKILL:
    # nothing runs): with one request in flight at a time, only the one sent before the kill
    # may fail (its client may see it fail after the worker is gone), and no request sent after
    # it, the connections waiting on the port included. Closed, or reset when the request was
    # still unread in the dead worker's socket.
    assert len(traffic.failures) <= 1, traffic.failures
    dropped = ("RemoteProtocolError", "ReadError('[Errno 104] Connection reset by peer')")
    for sent, failure in traffic.failures:
        assert sent < killed_at and failure.startswith(dropped), traffic.failures
    assert set(traffic.statuses) == {200}
    assert b"worker_died" in server.output()
    assert server.stop() == 0
    assert children(supervisor) == []


def test_sighup_swaps_the_workers_with_no_request_refused(
    cluster: tuple[Serve, str, str],
) -> None:
    server, url, key = cluster
    supervisor = server.proc.pid
    old = wait_for(lambda: len(children(supervisor)) == 2 and children(supervisor), "workers")
    assert isinstance(old, list)

    with Traffic(url, key) as traffic:
        wait_for(lambda: len(traffic.statuses) >= 5, "answers")
        server.proc.send_signal(signal.SIGHUP)
        new = wait_for(
            lambda: len(now := children(supervisor)) == 2 and not set(now) & set(old) and now,
            "the new workers alone",
        )
        assert isinstance(new, list)
        answered = len(traffic.statuses)
        wait_for(lambda: len(traffic.statuses) >= answered + 5, "answers from the new workers")

    assert traffic.failures == []
    assert set(traffic.statuses) == {200}
    assert b"graceful_restart_done" in server.output()
    assert server.stop(signal.SIGINT) == 0


def test_caps_hold_across_the_workers(env: dict[str, str]) -> None:
    email = "race@example.com"
    key = api_key(env, email)
    document = ok_json(paysign(env, "admin", "get-policy", "--email", email))
    document["caps"] = {"perPayment": None, "daily": K * AMOUNT, "monthly": None}
    ok_json(
        paysign(
            env, "admin", "set-policy", "--email", email, "--file", "-", stdin=json.dumps(document)
        )
    )

    server = Serve(env, "--workers", "2")
    with server as url:
        wait_for(lambda: len(children(server.proc.pid)) == 2, "workers")
        results = asyncio.run(burst(url, key, live=100, sandbox=20))
        assert server.stop() == 0

    live = [(status, slug) for is_sandbox, status, slug in results if not is_sandbox]
    assert live.count((200, "")) == K
    assert live.count((403, "spend-cap-exceeded")) == 100 - K
    assert [status for is_sandbox, status, _ in results if is_sandbox] == [200] * 20
