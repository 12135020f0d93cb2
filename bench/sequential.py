"""One request at a time on one keep-alive connection: checking answers, measuring latency."""

from __future__ import annotations

import base64
import http.client
import json
import statistics
import time
from collections.abc import Sequence

from bench.request import HOST, PATH
from bench.servers import Target


class KeepAliveClient:
    """One keep-alive connection; minimal client cost for the sequential latency test."""

    def __init__(self, port: int, body: bytes, api_key: str | None) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=10)
        self.body = body
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def post(self) -> tuple[int, bytes]:
        self.conn.request("POST", PATH, body=self.body, headers=self.headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.conn.close()


def verify(target: Target, body: bytes) -> int:
    """A few real requests must sign; returns the size of a response body."""
    client = KeepAliveClient(target.port, body, target.api_key)
    try:
        size = 0
        nonces = set()
        for _ in range(3):
            status, data = client.post()
            if status != 200:
                raise SystemExit(f"{target.name}: expected 200, got {status}: {data[:300]!r}")
            answer = json.loads(data)
            payload = json.loads(base64.b64decode(answer["paymentSignatureHeader"]))
            signature = payload["payload"]["signature"]
            if not (signature.startswith("0x") and len(signature) == 132):
                raise SystemExit(f"{target.name}: no signature in the payment header")
            nonces.add(answer["nonce"])
            size = len(data)
        if len(nonces) != 3:
            raise SystemExit(f"{target.name}: nonces repeat")
        return size
    finally:
        client.close()


def interleaved_latency(
    targets: Sequence[Target], body: bytes, n: int, *, turn: int = 50
) -> dict[str, dict[str, float]]:
    """Each target's lone-request latency over ``n`` requests on one keep-alive connection,
    the targets taking turns of ``turn`` requests.

    The goals compare these latencies (what a lone request adds over the ceiling's, on
    PostgreSQL against SQLite), and this machine's speed drifts within a minute: measured one
    target after the other, a ratio carried the drift between their measurements. In turns,
    every target's p50 is taken over the same seconds.
    """
    if len({t.name for t in targets}) != len(targets):
        raise ValueError("each target needs a name of its own: its latencies are kept under it")
    clients = {t.name: KeepAliveClient(t.port, body, t.api_key) for t in targets}
    latencies: dict[str, list[float]] = {t.name: [] for t in targets}
    bad = dict.fromkeys(clients, 0)
    try:
        for client in clients.values():
            for _ in range(min(50, n)):
                client.post()
        while any(len(lat) < n for lat in latencies.values()):
            for name, client in clients.items():
                lat = latencies[name]
                for _ in range(min(turn, n - len(lat))):
                    started = time.perf_counter_ns()
                    status, _ = client.post()
                    lat.append((time.perf_counter_ns() - started) / 1000)
                    bad[name] += not 200 <= status <= 299
    finally:
        for client in clients.values():
            client.close()
    return {name: _summary(lat, bad[name]) for name, lat in latencies.items()}


def _summary(latencies: list[float], bad: int) -> dict[str, float]:
    latencies = sorted(latencies)
    return {
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "non2xx": bad,
        "n": len(latencies),
    }


def sequential_latency_httpx(target: Target, body: bytes, n: int) -> float:
    import httpx

    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {target.api_key}"}
    with httpx.Client(timeout=10) as client:
        for _ in range(min(50, n)):
            client.post(target.url, content=body, headers=headers)
        lat = []
        for _ in range(n):
            started = time.perf_counter_ns()
            client.post(target.url, content=body, headers=headers)
            lat.append((time.perf_counter_ns() - started) / 1000)
    return statistics.median(lat)
