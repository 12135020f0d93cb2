"""A worker's side of ``paysign serve --workers N``: it serves the connections the supervisor
hands it over its channel (``handoff``), instead of accepting any itself.

To uvicorn this is one more server: its shutdown closes it (no connection is taken after) and
waits for it, then drains the connections it serves as it drains its own.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import structlog

log = structlog.get_logger("paysign.serving")

#: Connections taken from the channel in one turn of the event loop, at most.
RECEIVE_PER_TURN = 64


class HandedConnections(asyncio.AbstractServer):
    """Serves ``protocol_factory`` on every connection received on ``channel``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        channel: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
    ) -> None:
        self._loop = loop
        self._channel = channel
        self._factory = protocol_factory
        self._serving = False
        self._connecting: set[asyncio.Task[object]] = set()
        channel.setblocking(False)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return self._serving

    async def start_serving(self) -> None:
        if not self._serving:
            self._serving = True
            self._loop.add_reader(self._channel.fileno(), self._receive)

    async def serve_forever(self) -> None:
        await self.start_serving()
        await asyncio.Event().wait()

    def close(self) -> None:
        if self._serving:
            self._serving = False
            self._loop.remove_reader(self._channel.fileno())

    async def wait_closed(self) -> None:
        if self._connecting:
            await asyncio.gather(*self._connecting, return_exceptions=True)

    def _receive(self) -> None:
        for _ in range(RECEIVE_PER_TURN):
            try:
                data, fds, _, _ = socket.recv_fds(self._channel, 1, 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.error("handoff_channel_failed", error=type(exc).__name__)
                self.close()
                return
            if not data and not fds:  # the supervisor is gone; its death signal follows
                self.close()
                return
            for fd in fds:
                self._serve(socket.socket(fileno=fd))

    def _serve(self, connection: socket.socket) -> None:
        connection.setblocking(False)
        if connection.family in (socket.AF_INET, socket.AF_INET6):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = self._loop.create_task(self._connect(connection))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, connection: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._factory, connection)
        except OSError:  # the client went away before its transport was made
            connection.close()
