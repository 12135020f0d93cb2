"""The supervisor's hand-off of connections to its workers (``serving/handoff.py``), on real
sockets: a listening TCP socket, and for each worker the pair of Unix sockets it is started with.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from paysign.serving.handoff import ConnectionHandoff, worker_channel


class FakeWorker:
    """The worker's end of a channel: receives what is handed to it."""

    def __init__(self) -> None:
        self.channel, self.end = worker_channel()
        self.end.settimeout(5)
        self.received: list[socket.socket] = []

    def take(self, n: int) -> list[socket.socket]:
        """The next ``n`` connections handed over (fails after 5 s without one)."""
        got = []
        for _ in range(n):
            _, fds, _, _ = socket.recv_fds(self.end, 1, 1)
            got.extend(socket.socket(fileno=fd) for fd in fds)
        self.received.extend(got)
        return got

    def nothing_pending(self, wait: float = 0.3) -> bool:
        self.end.settimeout(wait)
        try:
            socket.recv_fds(self.end, 1, 1)
        except TimeoutError:
            return True
        finally:
            self.end.settimeout(5)
        return False

    def close(self) -> None:
        for sock in (*self.received, self.channel, self.end):
            sock.close()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock


@pytest.fixture
def handoff(listener: socket.socket) -> Iterator[ConnectionHandoff]:
    handoff = ConnectionHandoff(listener)
    handoff.start()
    yield handoff
    handoff.stop()


@pytest.fixture
def workers() -> Iterator[list[FakeWorker]]:
    made = [FakeWorker() for _ in range(3)]
    yield made
    for worker in made:
        worker.close()


@pytest.fixture
def clients() -> Iterator[list[socket.socket]]:
    """Connect more with ``connect(clients, listener)``; all are closed after the test."""
    opened: list[socket.socket] = []
    yield opened
    for client in opened:
        client.close()


def connect(clients: list[socket.socket], listener: socket.socket, n: int = 1) -> None:
    clients.extend(socket.create_connection(listener.getsockname(), timeout=5) for _ in range(n))


def peers(connections: list[socket.socket]) -> set[tuple[str, int]]:
    return {conn.getpeername() for conn in connections}


def names(clients: list[socket.socket]) -> set[tuple[str, int]]:
    return {client.getsockname() for client in clients}


def test_a_burst_of_connections_is_handed_to_the_workers_in_turn(
    listener: socket.socket,
    handoff: ConnectionHandoff,
    workers: list[FakeWorker],
    clients: list[socket.socket],
) -> None:
    first, second, _ = workers
    handoff.route_to([first.channel, second.channel])
    connect(clients, listener, 8)

    to_first, to_second = first.take(4), second.take(4)

    assert first.nothing_pending() and second.nothing_pending()
    assert peers(to_first) | peers(to_second) == names(clients)
    # Each is the client's own connection, ready to serve.
    for client in clients:
        client.sendall(b"ping")
    for conn in to_first + to_second:
        conn.settimeout(5)
        assert conn.recv(4) == b"ping"


def test_nothing_is_accepted_while_no_worker_is_ready(
    listener: socket.socket,
    handoff: ConnectionHandoff,
    workers: list[FakeWorker],
    clients: list[socket.socket],
) -> None:
    worker = workers[0]
    connect(clients, listener, 2)  # they wait in the kernel's queue
    assert worker.nothing_pending()

    handoff.route_to([worker.channel])

    assert peers(worker.take(2)) == names(clients)


def test_a_dead_workers_share_goes_to_the_others(
    listener: socket.socket,
    handoff: ConnectionHandoff,
    workers: list[FakeWorker],
    clients: list[socket.socket],
) -> None:
    alive, dead, _ = workers
    dead.end.close()  # killed: its end of the channel is gone
    handoff.route_to([dead.channel, alive.channel])
    connect(clients, listener, 4)

    assert peers(alive.take(4)) == names(clients)


def test_a_worker_routed_away_is_handed_nothing_more(
    listener: socket.socket,
    handoff: ConnectionHandoff,
    workers: list[FakeWorker],
    clients: list[socket.socket],
) -> None:
    retiring, first, second = workers
    handoff.route_to([retiring.channel])
    connect(clients, listener)
    assert len(retiring.take(1)) == 1

    handoff.route_to([first.channel, second.channel])  # a graceful restart's new workers
    connect(clients, listener, 4)

    assert len(first.take(2)) == len(second.take(2)) == 2
    assert retiring.nothing_pending()


def test_after_stop_no_connection_is_accepted(
    listener: socket.socket,
    workers: list[FakeWorker],
    clients: list[socket.socket],
) -> None:
    worker = workers[0]
    handoff = ConnectionHandoff(listener)
    handoff.route_to([worker.channel])
    handoff.start()
    handoff.stop()

    connect(clients, listener)

    assert worker.nothing_pending()


def test_a_full_worker_is_passed_over(
    listener: socket.socket,
    handoff: ConnectionHandoff,
    workers: list[FakeWorker],
    clients: list[socket.socket],
) -> None:
    stuck, free, _ = workers
    # A worker that stopped reading its channel: its socket's buffer fills up.
    stuck.channel.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    filled = 0
    while True:
        try:
            socket.send_fds(stuck.channel, [b"c"], [stuck.end.fileno()])
            filled += 1
        except BlockingIOError:
            break
    assert filled > 0
    handoff.route_to([stuck.channel, free.channel])
    connect(clients, listener, 3)

    assert peers(free.take(3)) == names(clients)
