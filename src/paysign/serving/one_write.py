"""uvicorn's HTTP protocol, but a response of known length goes out in one write.

uvicorn writes a response's head (status line and headers) and its body with two
``transport.write`` calls. On uvloop each is a ``send()`` system call of its own, and each a
TCP segment the client wakes for. Under load uvicorn's ``send``, the two system calls within,
was a fifth of the event loop's time with the GIL (py-spy of ``paysign serve``).

Measured on the bare Starlette app (``bench/one_write.py``, 12 alternating rounds): the
server's system CPU per request went from 11.8 to 7.4 µs, while holding the head costs
~7.5k instructions of Python per request (callgrind), about 2.5 µs of user CPU; 500
requests are 503 ``write`` calls instead of 1,003 (strace).

``OneWriteProtocol`` keeps the head of a response whose length is known (``content-length``,
not ``HEAD``, not empty) and sends it with the first bytes of the body. Everything else is
uvicorn's, unchanged:

* a streamed response (``transfer-encoding: chunked``: the MCP connector's event streams) has
  its head sent at once, as before: its first event may be long in coming;
* ``100 Continue``, written before any response starts, is never held;
* a response closed before its body (the app failed after starting it) has its head sent
  before the close, as uvicorn would have.

    config = uvicorn.Config(app, http=OneWriteProtocol, ...)
"""

from __future__ import annotations

import asyncio
import weakref

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle


class _HeadWithBody:
    """A response cycle's transport: holds its response's head until the body's first write.

    The cycle calls ``write``, ``close`` and ``is_closing`` on it, nothing else. (No
    ``__getattr__`` to pass the rest on: it would slow every attribute lookup here.)
    """

    __slots__ = ("_cycle", "_head", "_headed", "_transport")

    def __init__(self, cycle: RequestResponseCycle, transport: asyncio.Transport) -> None:
        # Weak: the cycle holds this, and a reference cycle per request would leave every
        # request's objects to the garbage collector, whose pauses were the p99 (3 ms to 10).
        self._cycle = weakref.ref(cycle)
        self._transport = transport
        self._head: bytes | None = None
        self._headed = False  # the head has been written (or is held)

    def write(self, data: bytes) -> None:
        if self._headed:
            head = self._head
            if head is not None:
                self._head = None
                data = head + data
        else:
            cycle = self._cycle()
            if cycle is not None and cycle.response_started:  # else: 100 Continue
                self._headed = True
                # A length still expected is a content-length's (a chunked one counts none),
                # and a HEAD response writes no body to carry its head.
                if cycle.expected_content_length > 0 and cycle.scope["method"] != "HEAD":
                    self._head = data
                    return
        self._transport.write(data)

    def close(self) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head)
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()


class OneWriteProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` whose responses of known length are written in one piece."""

    def on_headers_complete(self) -> None:
        previous = self.cycle
        HttpToolsProtocol.on_headers_complete(self)
        cycle = self.cycle
        # A new cycle's task is created but has not run yet: it writes only through this.
        if cycle is not previous and cycle is not None:
            cycle.transport = _HeadWithBody(cycle, self.transport)  # type: ignore[assignment]
