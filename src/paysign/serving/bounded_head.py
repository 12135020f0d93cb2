"""The HTTP protocol ``paysign serve`` runs: :class:`~paysign.serving.one_write.OneWriteProtocol`
with a bound on a request's head.

uvicorn's httptools protocol reads a request line and headers of any length: a header of
300 MB sent to ``/healthz``, with no credential, was held whole in memory (the server grew
from 403 to 784 MB). A reverse proxy's limits cover this in a deployment; paysign run on its
own, or behind a proxy that passes long heads, refuses a head past :data:`MAX_HEAD_BYTES` with
``431`` and closes the connection, as nginx does past its ``large_client_header_buffers``.

The bytes are counted as they arrive, from the end of one request's headers to the end of the
next's; the parser holds at most one read's worth past the limit before the connection is
closed. A request's body is not counted.

    config = uvicorn.Config(app, http=BoundedHeadProtocol, ...)
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from paysign.serving.one_write import OneWriteProtocol

#: The longest request line and headers read; browsers and HTTP clients send a few KiB.
MAX_HEAD_BYTES = 64 * 1024

_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 37\r\n"
    b"connection: close\r\n\r\n"
    b"the request's headers are over 64 KiB"
)


class BoundedHeadProtocol(OneWriteProtocol):
    """``OneWriteProtocol`` that reads at most :data:`MAX_HEAD_BYTES` of a request's head."""

    _head_bytes = 0

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:  # a body, or the next request
            HttpToolsProtocol.data_received(self, data)
            return
        self._head_bytes += len(data)
        HttpToolsProtocol.data_received(self, data)  # a head that ends in it resets the count
        if self._head_bytes > MAX_HEAD_BYTES:
            self._refuse_head()

    def on_headers_complete(self) -> None:
        self._head_bytes = 0
        OneWriteProtocol.on_headers_complete(self)

    def _refuse_head(self) -> None:
        self.logger.warning("A request's head over %d bytes was refused.", MAX_HEAD_BYTES)
        if not self.transport.is_closing():
            self.transport.write(_TOO_LARGE)
            self.transport.close()
