"""A worker's side of the hand-off (``serving/handed_connections.py``): the connections received
on its channel are served by the protocol it is given, until the supervisor's end is gone."""

from __future__ import annotations

import asyncio
import socket

from paysign.serving.handed_connections import HandedConnections
from paysign.serving.handoff import worker_channel


class Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


async def hand_over(channel: socket.socket) -> socket.socket:
    """A client connected to a fresh listener, its accepted end sent over ``channel``."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=5)
        accepted, _ = listener.accept()
        with accepted:
            socket.send_fds(channel, [b"c"], [accepted.fileno()])
    return client


async def wait_until_not_serving(server: HandedConnections) -> bool:
    for _ in range(500):
        if not server.is_serving():
            return True
        await asyncio.sleep(0.01)
    return False


def test_what_is_handed_over_is_served_until_the_supervisor_is_gone() -> None:
    async def scenario() -> None:
        ours, theirs = worker_channel()
        server = HandedConnections(asyncio.get_running_loop(), theirs, Echo)
        await server.start_serving()
        clients = [await hand_over(ours) for _ in range(3)]
        for i, client in enumerate(clients):
            reader, writer = await asyncio.open_connection(sock=client)
            writer.write(b"ping %d" % i)
            assert await asyncio.wait_for(reader.readexactly(6), 5) == b"ping %d" % i
            writer.close()

        ours.close()  # the supervisor died: its death signal is on its way

        assert await wait_until_not_serving(server)
        await server.wait_closed()
        theirs.close()

    asyncio.run(scenario())


def test_closed_it_takes_no_more_connections() -> None:
    async def scenario() -> None:
        ours, theirs = worker_channel()
        server = HandedConnections(asyncio.get_running_loop(), theirs, Echo)
        await server.start_serving()
        server.close()  # uvicorn's shutdown
        client = await hand_over(ours)
        await asyncio.sleep(0.2)
        # Still in the channel, never taken up: nothing answers the client.
        _, fds, _, _ = socket.recv_fds(theirs, 1, 1)
        assert len(fds) == 1
        for sock in (client, socket.socket(fileno=fds[0]), ours, theirs):
            sock.close()

    asyncio.run(scenario())
