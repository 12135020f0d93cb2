"""The request log: one JSON line per request, written together at the end of a loop turn."""

from __future__ import annotations

import asyncio
import io
import logging
import re
import subprocess
import sys

import orjson

from paysign.logging import RequestLog


class CountingStream(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.writes += 1
        return super().write(data)


def test_requests_ending_in_one_loop_turn_share_one_write() -> None:
    stream = CountingStream()
    log = RequestLog(stream=stream)

    async def turn() -> None:
        for i in range(20):
            log.record(request_id=f"r{i}", method="POST", path="/p", status=200, ms=1.5)
        assert stream.writes == 0  # not before the turn ends
        await asyncio.sleep(0)

    asyncio.run(turn())
    assert stream.writes == 1
    lines = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["request_id"] for line in lines] == [f"r{i}" for i in range(20)]
    assert lines[0]["event"] == "request" and lines[0]["level"] == "info"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lines[0]["timestamp"])


def test_outside_a_loop_a_line_is_written_at_once() -> None:
    stream = CountingStream()
    RequestLog(stream=stream).record(request_id="x", status=404)
    assert orjson.loads(stream.getvalue())["status"] == 404


def test_above_info_nothing_is_written() -> None:
    stream = CountingStream()
    RequestLog(level=logging.WARNING, stream=stream).record(request_id="x", status=200)
    assert stream.getvalue() == b""


def test_the_process_log_is_silent_until_configured() -> None:
    log = RequestLog(level=logging.WARNING)
    stream = CountingStream()
    log.record(request_id="before", status=200)
    log.configure(logging.INFO, stream)
    log.record(request_id="after", status=200)
    assert [orjson.loads(x)["request_id"] for x in stream.getvalue().splitlines()] == ["after"]


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
