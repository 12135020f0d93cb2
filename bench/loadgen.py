"""Fallback HTTP load generator for ``bench/sign.py`` when ``wrk`` is not installed.

Closed loop like ``wrk``: ``--connections`` keep-alive HTTP/1.1 connections each send the same
POST back to back for ``--duration`` seconds. Runs in its own process (``sign.py`` starts it)
and prints one ``BENCH_RESULT {json}`` line with the same fields as ``bench/sign.lua``.

Two clients:

* ``raw`` (default): hand-written HTTP/1.1 over asyncio streams (uvloop when installed). Cheap
  per request, so on a 2-core machine it still loads one uvicorn worker close to saturation.
* ``httpx``: ``httpx.AsyncClient``. Closer to what an agent runs, but its per-request cost in
  the client is several times the server's, so it measures the client more than the server.

    .venv/bin/python bench/loadgen.py --url http://127.0.0.1:8402/wallets/signatures \\
        --body-file body.json --connections 32 --duration 8   # key from $BENCH_API_KEY
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from urllib.parse import urlsplit


class Stats:
    def __init__(self) -> None:
        self.latencies_ns: list[int] = []
        self.non2xx = 0
        self.socket_errors = 0


def _request_bytes(url: str, body: bytes, api_key: str | None) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or 80
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    if api_key:
        lines.append(f"Authorization: Bearer {api_key}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    return host, port, head + body


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise ValueError("response without Content-Length (chunked answers are not supported)")


async def _raw_worker(host: str, port: int, request: bytes, deadline: float, stats: Stats) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < deadline:
            started = time.perf_counter_ns()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(_content_length(head))
            stats.latencies_ns.append(time.perf_counter_ns() - started)
            status = int(head[9:12])
            if not 200 <= status <= 299:
                stats.non2xx += 1
    except (OSError, asyncio.IncompleteReadError, ValueError):
        stats.socket_errors += 1
    finally:
        writer.close()


async def _httpx_run(
    url: str, body: bytes, api_key: str | None, connections: int, deadline: float, stats: Stats
) -> None:
    import httpx

    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(limits=limits, timeout=10.0) as client:

        async def worker() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter_ns()
                try:
                    response = await client.post(url, content=body, headers=headers)
                except httpx.HTTPError:
                    stats.socket_errors += 1
                    continue
                stats.latencies_ns.append(time.perf_counter_ns() - started)
                if not 200 <= response.status_code <= 299:
                    stats.non2xx += 1

        await asyncio.gather(*(worker() for _ in range(connections)))


def _percentile(sorted_ns: list[int], q: float) -> int:
    if not sorted_ns:
        return 0
    index = min(len(sorted_ns) - 1, max(0, round(q / 100 * len(sorted_ns)) - 1))
    return sorted_ns[index] // 1000


async def run(args: argparse.Namespace) -> dict[str, int]:
    body = Path(args.body_file).read_bytes()
    stats = Stats()
    started = time.perf_counter()
    deadline = started + args.duration
    if args.client == "httpx":
        await _httpx_run(args.url, body, args.api_key, args.connections, deadline, stats)
    else:
        host, port, request = _request_bytes(args.url, body, args.api_key)
        await asyncio.gather(
            *(_raw_worker(host, port, request, deadline, stats) for _ in range(args.connections))
        )
    elapsed_us = int((time.perf_counter() - started) * 1e6)
    lat = sorted(stats.latencies_ns)
    return {
        "requests": len(lat),
        "duration_us": elapsed_us,
        "non2xx": stats.non2xx,
        "socket_errors": stats.socket_errors,
        "timeouts": 0,
        "p50_us": _percentile(lat, 50),
        "p90_us": _percentile(lat, 90),
        "p99_us": _percentile(lat, 99),
        "max_us": lat[-1] // 1000 if lat else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--body-file", required=True)
    parser.add_argument(
        "--api-key", default=os.environ.get("BENCH_API_KEY"), help="default: $BENCH_API_KEY"
    )
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(run(args))
    else:
        result = uvloop.run(run(args))
    print("BENCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
