"""Structured logs (one JSON object per line on stderr). Nothing secret is ever passed in.

The request log is the one line every request writes, so it skips structlog's processor chain
and is written once per event-loop turn: under load dozens of requests end in the same turn,
and one system call for all their lines costs less than one each (it was a sixth of the
signing endpoint's time). A line holds the same fields structlog would write.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any, BinaryIO

import orjson
import structlog


class RequestLog:
    """``record`` adds a request's line; lines are written at the end of the loop turn (or at
    once, outside a running loop).

        >>> import io
        >>> out = io.BytesIO()
        >>> log = RequestLog(stream=out)
        >>> log.record(request_id="ab", method="GET", path="/healthz", status=200, ms=0.1)
        >>> orjson.loads(out.getvalue())["event"]
        'request'
    """

    def __init__(self, level: int = logging.INFO, stream: BinaryIO | None = None) -> None:
        self.enabled = level <= logging.INFO
        self._stream = stream
        self._lines: list[bytes] = []
        self._second = -1
        self._stamp = ""

    def configure(self, level: int, stream: BinaryIO) -> None:
        self.enabled = level <= logging.INFO
        self._stream = stream

    def record(self, **fields: Any) -> None:
        if not self.enabled:
            return
        fields["event"] = "request"
        fields["level"] = "info"
        fields["timestamp"] = self._timestamp()
        self._lines.append(orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE))
        if len(self._lines) > 1:
            return  # a write is already due this turn
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:
            self.flush()

    def flush(self) -> None:
        lines, self._lines = self._lines, []
        if not lines:
            return
        stream = self._stream or sys.stderr.buffer
        stream.write(b"".join(lines))
        stream.flush()

    def _timestamp(self) -> str:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((now - second) * 1_000_000):06d}Z"


#: The process's request log: silent until ``configure_logging`` (an app embedded in a test or
#: another program writes no request lines of its own).
REQUEST_LOG = RequestLog(level=logging.WARNING)


#: Exceptions are rendered as plain tracebacks: never with the frames' local variables, which
#: hold request headers (an API key), bodies and decrypted keys.
_PROCESSORS: list[Any] = [
    structlog.processors.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.format_exc_info,
    structlog.processors.JSONRenderer(serializer=orjson.dumps),
]


def configure_logging(level: str = "info") -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    REQUEST_LOG.flush()
    REQUEST_LOG.configure(numeric, sys.stderr.buffer)
    _configure_structlog(numeric)


def _configure_structlog(level: int) -> None:
    structlog.configure(
        processors=_PROCESSORS,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(file=sys.stderr.buffer),
        cache_logger_on_first_use=True,
    )


def _stderr_as_it_is_now(*_args: Any) -> structlog.PrintLogger:
    # Looked up at each event: whoever embeds the app (a test runner) may swap sys.stderr.
    return structlog.PrintLogger(sys.stderr)


# An app embedded in another program (or a test) that never calls configure_logging would log
# through structlog's development defaults, whose rich tracebacks print every frame's locals.
if not structlog.is_configured():
    structlog.configure(
        processors=[*_PROCESSORS[:-1], structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=_stderr_as_it_is_now,
        cache_logger_on_first_use=False,
    )
