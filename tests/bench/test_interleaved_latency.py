"""bench/sequential.py: the lone-request latencies of several servers are measured in turns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Run from the checkout's root, where `bench` is the benchmark's package (under pytest it is
# tests/bench): three servers, then the measurement, printed as JSON.
MEASURE = """
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from bench.sequential import interleaved_latency
from bench.servers import Target

arrivals = []

def server(name, delay, status):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the bench's client expects
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            arrivals.append(name)
            time.sleep(delay)
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        def log_message(self, *args):
            pass
    made = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=made.serve_forever, daemon=True).start()
    return Target(name, made.server_address[1], None, None, Path("/dev/null"))

targets = [server("quick", 0.0, 200), server("slow", 0.02, 200), server("refusing", 0.0, 503)]
measured = interleaved_latency(targets, b'{"x": 1}', 25, turn=10)
print(json.dumps({"measured": measured, "arrivals": arrivals}))
"""


def _measure() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_servers_take_turns_and_each_gets_its_own_latencies() -> None:
    result = _measure()
    measured, arrivals = result["measured"], result["arrivals"]

    # 25 warm-up requests each, then turns of 10, 10 and the last 5, server after server.
    warm_up, counted = arrivals[:75], arrivals[75:]
    assert warm_up == ["quick"] * 25 + ["slow"] * 25 + ["refusing"] * 25
    turns = [("quick", 10), ("slow", 10), ("refusing", 10)] * 2
    turns += [("quick", 5), ("slow", 5), ("refusing", 5)]
    assert counted == [name for name, length in turns for _ in range(length)]

    assert {name: r["n"] for name, r in measured.items()} == {
        "quick": 25,
        "slow": 25,
        "refusing": 25,
    }
    assert {name: r["non2xx"] for name, r in measured.items()} == {
        "quick": 0,
        "slow": 0,
        "refusing": 25,
    }
    # Each server's own requests are timed: the slow one's sleep shows in its p50 alone.
    assert measured["slow"]["p50"] >= 20_000
    assert measured["quick"]["p50"] < measured["slow"]["p50"] - 10_000
    assert measured["slow"]["p99"] >= measured["slow"]["p50"]


TWO_OF_ONE_NAME = """
from pathlib import Path
from bench.sequential import interleaved_latency
from bench.servers import Target
twins = [Target("sqlite", port, None, None, Path("/dev/null")) for port in (1, 2)]
try:
    interleaved_latency(twins, b"{}", 5)
except ValueError as exc:
    print("refused:", exc)
"""


def test_two_servers_of_one_name_are_refused_before_any_request() -> None:
    # Their latencies would be kept under one name, and one server's would be lost. Ports 1
    # and 2 answer nothing: a request sent to either would fail otherwise.
    done = subprocess.run(
        [sys.executable, "-c", TWO_OF_ONE_NAME],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("refused: each target needs a name of its own")
