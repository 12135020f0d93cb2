"""Logs go through structlog; the request log is one JSON line per request, written together
with the other lines that end in the same event-loop turn."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import orjson

from conftest import free_port, paysign
from paysign import logging
from paysign.logging import LoopTurnWriter
from serving_support import Serve

API_KEY = "psk_" + "L" * 43
BODY_SECRET = "0x" + "5e" * 32


class CountingStream(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.writes += 1
        return super().write(data)


def test_lines_ending_in_one_loop_turn_share_one_write() -> None:
    stream = CountingStream()
    writer = LoopTurnWriter(stream)

    async def turn() -> None:
        for i in range(20):
            writer.info(b'{"n":%d}' % i)
        assert stream.writes == 0  # not before the turn ends
        await asyncio.sleep(0)

    asyncio.run(turn())
    assert stream.writes == 1
    assert [orjson.loads(line)["n"] for line in stream.getvalue().splitlines()] == list(range(20))


def test_outside_a_loop_a_line_is_written_at_once() -> None:
    stream = CountingStream()
    LoopTurnWriter(stream).info(b"{}")
    assert (stream.writes, stream.getvalue()) == (1, b"{}\n")


def test_a_warning_is_written_at_once_after_the_lines_waiting() -> None:
    stream = CountingStream()
    writer = LoopTurnWriter(stream)

    async def turn() -> None:
        writer.info(b"1")
        writer.error(b"2")
        assert (stream.writes, stream.getvalue()) == (1, b"1\n2\n")
        await asyncio.sleep(0)

    asyncio.run(turn())
    assert stream.writes == 1


def test_the_request_line_is_what_the_configured_chain_would_write() -> None:
    out = io.BytesIO()
    request_log = logging.RequestLog(LoopTurnWriter(out), logging._UtcTimestamp())
    request_log.enabled = True
    request_log("0123456789abcdef", "POST", "/wallets/signatures", 200, 1.25)
    direct = orjson.loads(out.getvalue())
    # The same event through the processors configure_logging sets, at the info level.
    chained: object = {
        "request_id": "0123456789abcdef",
        "method": "POST",
        "path": "/wallets/signatures",
        "status": 200,
        "ms": 1.25,
        "event": logging.REQUEST_EVENT,
    }
    for processor in logging._PROCESSORS:
        chained = processor(None, "info", chained)
    assert isinstance(chained, bytes)
    through_chain = orjson.loads(chained)
    stamps = [line.pop("timestamp") for line in (direct, through_chain)]
    assert direct == through_chain
    assert list(direct) == list(through_chain)  # the same order of keys on the line
    for stamp in stamps:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp)


def test_request_lines_are_off_until_logging_is_configured() -> None:
    out = io.BytesIO()
    logging.RequestLog(LoopTurnWriter(out), logging._UtcTimestamp())("id", "GET", "/", 200, 0.1)
    assert out.getvalue() == b""


# A fresh interpreter: what is logged before configure_logging and after it depends on the
# process's structlog configuration, which the app's other tests share.
REQUEST_PROGRAM = """
import asyncio, sys
level, key, secret = sys.argv[1:]
from paysign.api.middleware import RequestLogMiddleware
from paysign.logging import configure_logging

async def app(scope, receive, send):
    await receive()
    await send({"type": "http.response.start", "status": 201, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})

async def one_request(label):
    scope = {
        "type": "http", "method": "POST", "path": "/wallets/signatures", "query_string": b"",
        "headers": [(b"authorization", b"Bearer " + key.encode()), (b"x-api-key", key.encode())],
    }
    body = {"type": "http.request", "body": b'{"secret": "%s"}' % secret.encode()}
    async def receive():
        return body
    async def send(message):
        if message["type"] == "http.response.start":
            print(label, dict(message["headers"])[b"x-request-id"].decode())
    await RequestLogMiddleware(app, "https://p.example/problems/")(scope, receive, send)

asyncio.run(one_request("unconfigured"))
configure_logging(level)
asyncio.run(one_request("configured"))
"""


def run_requests(level: str) -> tuple[dict[str, str], str]:
    ran = subprocess.run(
        [sys.executable, "-c", REQUEST_PROGRAM, level, API_KEY, BODY_SECRET],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    request_ids = dict(line.split() for line in ran.stdout.splitlines())
    return request_ids, ran.stderr


def test_a_request_writes_one_event_with_no_secret_in_it() -> None:
    request_ids, stderr = run_requests("info")
    events = [orjson.loads(line) for line in stderr.splitlines()]
    # Before configure_logging an embedded app writes no request lines of its own.
    assert len(events) == 1
    (event,) = events
    fields = {"event", "level", "timestamp", "request_id", "method", "path", "status", "ms"}
    assert set(event) == fields
    assert (event["event"], event["level"], event["method"], event["path"]) == (
        "request",
        "info",
        "POST",
        "/wallets/signatures",
    )
    assert event["status"] == 201 and isinstance(event["ms"], float)
    assert event["request_id"] == request_ids["configured"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["timestamp"])
    for secret in (API_KEY, "L" * 43, "Bearer", BODY_SECRET):
        assert secret not in stderr


def test_above_info_no_request_is_logged() -> None:
    request_ids, stderr = run_requests("warning")
    assert set(request_ids) == {"unconfigured", "configured"} and stderr == ""


def test_an_embedded_app_logs_errors_without_the_frames_locals() -> None:
    # A fresh interpreter: structlog as a program that embeds the app finds it, unconfigured.
    program = (
        "import structlog, paysign.app\n"
        "def handler(authorization):\n"
        "    raise ValueError('boom')\n"
        "try:\n"
        "    handler('Bearer psk_' + 'L' * 43)\n"
        "except ValueError:\n"
        "    structlog.get_logger('paysign.http').exception('unhandled_error')\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    line = orjson.loads(ran.stderr.strip().splitlines()[-1])
    assert line["event"] == "unhandled_error" and "ValueError: boom" in line["exception"]
    assert "psk_" not in ran.stderr and "L" * 43 not in ran.stderr


def test_serve_writes_request_lines_at_info_and_none_at_warning(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env["PAYSIGN_DATA_DIR"] = str(tmp_path / "var")
    for level, logged in (("INFO", True), ("warning", False)):
        server = Serve({**env, "PAYSIGN_LOG_LEVEL": level})
        with server as url:
            assert httpx.get(f"{url}/catalog").status_code == 200
            assert server.stop(signal.SIGTERM) == 0
            output = server.output()
        requests = [line for line in output.splitlines() if b'"event":"request"' in line]
        assert bool(requests) is logged, output[-2000:]


def test_an_unknown_log_level_stops_serve_before_it_starts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env["PAYSIGN_DATA_DIR"] = str(tmp_path / "var")
    ran = paysign({**env, "PAYSIGN_LOG_LEVEL": "verbose"}, "serve", "--port", str(free_port()))
    assert ran.returncode == 1
    assert ran.stderr.startswith("error: PAYSIGN_LOG_LEVEL: must be one of debug, info, warning")
    assert "Traceback" not in ran.stderr and not (tmp_path / "var").exists()
