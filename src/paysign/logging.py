"""Structured logs through structlog: one JSON object per line on stderr. Nothing secret is ever
passed in.

The request log (``request``, one event per HTTP request) is on the signing endpoint's hot path,
so a level's filter is its logger's method (``make_filtering_bound_logger``), loggers are built
once (``cache_logger_on_first_use``), the chain is short and the output end writes once per
event-loop turn: under load dozens of
requests end in the same turn, and one system call for all their lines costs less than one each
(a write per line was a sixth of the signing endpoint's time). The request event itself skips
the chain (``log_request``). Warnings and errors are written at once, with whatever lines are
waiting before them: a process that stops right after one still leaves it behind.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any, BinaryIO

import orjson
import structlog
from structlog.typing import EventDict, WrappedLogger

#: The event ``RequestLogMiddleware`` writes once per request.
REQUEST_EVENT = "request"


class LoopTurnWriter:
    """structlog's output end: ``info`` lines wait for the end of the event-loop turn (or are
    written at once outside a running loop); ``warning`` and above are written at once.

        >>> import io
        >>> out = io.BytesIO()
        >>> LoopTurnWriter(out).info(b'{"event":"request"}')
        >>> out.getvalue()
        b'{"event":"request"}\\n'
    """

    def __init__(self, stream: BinaryIO | None = None) -> None:
        #: ``None``: the process's stderr as it is when the lines are written.
        self.stream = stream
        self._lines: list[bytes] = []

    def info(self, line: bytes) -> None:
        self._lines.append(line)
        if len(self._lines) > 1:
            return  # a write is already due this turn
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:
            self.flush()

    def warning(self, line: bytes) -> None:
        self._lines.append(line)
        self.flush()

    debug = msg = info
    error = critical = exception = warning

    def flush(self) -> None:
        lines, self._lines = self._lines, []
        if not lines:
            return
        stream = self.stream or sys.stderr.buffer
        lines.append(b"")
        stream.write(b"\n".join(lines))
        stream.flush()


class _UtcTimestamp:
    """``timestamp`` as ``2026-11-25T16:25:34.123456Z``; the date part is formatted once a
    second rather than once an event."""

    def __init__(self) -> None:
        self._second = -1
        self._stamp = ""

    def __call__(self, _logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
        event_dict["timestamp"] = self.now()
        return event_dict

    def now(self) -> str:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((now - second) * 1_000_000):06d}Z"


class RequestLog:
    """Writes the request event, the line every HTTP request ends with, as the configured chain
    would render it (the same fields, level and timestamp) but without going through it: a
    bound logger behind a lazy proxy, a copied event dict and four processors cost more than
    the line itself, thousands of times a second under load.

    Off until ``configure_logging`` turns it on at ``info`` or below: an app embedded in a test
    or another program writes no request lines of its own.

        >>> import io
        >>> out = io.BytesIO()
        >>> log = RequestLog(LoopTurnWriter(out), _UtcTimestamp())
        >>> log.enabled = True
        >>> log("9f86d081884c7d65", "GET", "/healthz", 200, 0.12)
        >>> line = orjson.loads(out.getvalue())
        >>> line["event"], line["level"], line["path"], line["status"], line["ms"]
        ('request', 'info', '/healthz', 200, 0.12)
    """

    def __init__(self, writer: LoopTurnWriter, timestamp: _UtcTimestamp) -> None:
        self._writer = writer
        self._timestamp = timestamp
        self.enabled = False

    def __call__(
        self, request_id: str, method: str | None, path: str | None, status: int, ms: float
    ) -> None:
        if not self.enabled:
            return
        event = {
            "request_id": request_id,
            "method": method,
            "path": path,
            "status": status,
            "ms": ms,
            "event": REQUEST_EVENT,
            "level": "info",
            "timestamp": self._timestamp.now(),
        }
        self._writer.info(orjson.dumps(event))


#: Where every configured logger writes (kept across ``configure_logging`` calls, so a logger
#: cached before one writes where the last one said).
_STDERR = LoopTurnWriter()
_TIMESTAMP = _UtcTimestamp()

#: ``log_request(request_id, method, path, status, ms)``: the request event.
log_request = RequestLog(_STDERR, _TIMESTAMP)

#: Exceptions are rendered as plain tracebacks: never with the frames' local variables, which
#: hold request headers (an API key), bodies and decrypted keys.
_PROCESSORS: list[Any] = [
    structlog.processors.add_log_level,
    _TIMESTAMP,
    structlog.processors.format_exc_info,
    structlog.processors.JSONRenderer(serializer=orjson.dumps),
]


def configure_logging(level: str = "info") -> None:
    """Log at ``level`` (a ``logging`` level name; ``info`` when unknown) to stderr."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    _STDERR.flush()
    _STDERR.stream = sys.stderr.buffer
    log_request.enabled = numeric <= logging.INFO
    structlog.configure(
        processors=_PROCESSORS,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_to_stderr,
        cache_logger_on_first_use=True,
    )


def _to_stderr(*_args: Any) -> LoopTurnWriter:
    return _STDERR


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
