"""The supervisor's hand-off of connections to its workers (``serving/handoff.py``), on real
sockets: a listening TCP socket, and for each worker the pair of Unix sockets it is started with.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from paysign.serving.handoff import HANDOFF_PATIENCE_SECONDS, ConnectionHandoff, worker_channel


class FakeWorker:
    """The worker's end of a channel: receives what is handed to it."""

    def __init__(self) -> None:
        self.channel, self.end = worker_channel()
        self.end.settimeout(5)
        self.received: list[socket.socket] = []

    def take(self, n: int) -> list[socket.socket]:
        """The next ``n`` connections handed over (fails after 5 s without one)."""
        got: list[socket.socket] = []
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


class Port:
    """A listening socket, the supervisor's hand-off on it (not started), three fake workers and
    the clients connected so far."""

    def __init__(self, patience: float = HANDOFF_PATIENCE_SECONDS) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.handoff = ConnectionHandoff(self.listener, patience=patience)
        self.workers = [FakeWorker() for _ in range(3)]
        self.clients: list[socket.socket] = []

    def connect(self, n: int = 1) -> None:
        address = self.listener.getsockname()
        self.clients.extend(socket.create_connection(address, timeout=5) for _ in range(n))

    def client_names(self) -> set[tuple[str, int]]:
        return {client.getsockname() for client in self.clients}

    def close(self) -> None:
        self.handoff.stop()
        for worker in self.workers:
            worker.close()
        for sock in (*self.clients, self.listener):
            sock.close()


@pytest.fixture
def port() -> Iterator[Port]:
    """A ``Port`` whose hand-off is started."""
    made = Port()
    made.handoff.start()
    yield made
    made.close()


def peers(connections: list[socket.socket]) -> set[tuple[str, int]]:
    return {conn.getpeername() for conn in connections}


def test_a_burst_of_connections_is_handed_to_the_workers_in_turn(port: Port) -> None:
    first, second, _ = port.workers
    port.handoff.route_to([first.channel, second.channel])
    port.connect(8)

    to_first, to_second = first.take(4), second.take(4)

    assert first.nothing_pending() and second.nothing_pending()
    assert peers(to_first) | peers(to_second) == port.client_names()
    # Each is the client's own connection, ready to serve.
    for client in port.clients:
        client.sendall(b"ping")
    for conn in to_first + to_second:
        conn.settimeout(5)
        assert conn.recv(4) == b"ping"


def test_nothing_is_accepted_while_no_worker_is_ready(port: Port) -> None:
    worker = port.workers[0]
    port.connect(2)  # they wait in the kernel's queue
    assert worker.nothing_pending()

    port.handoff.route_to([worker.channel])

    assert peers(worker.take(2)) == port.client_names()


def test_a_dead_workers_share_goes_to_the_others(port: Port) -> None:
    alive, dead, _ = port.workers
    dead.end.close()  # killed: its end of the channel is gone
    port.handoff.route_to([dead.channel, alive.channel])
    port.connect(4)

    assert peers(alive.take(4)) == port.client_names()


def test_a_connection_no_worker_takes_is_closed_and_logged() -> None:
    port = Port(patience=0.3)
    try:
        dead = port.workers[0]
        dead.end.close()
        with capture_logs() as logged:
            port.handoff.route_to([dead.channel])  # it died before the supervisor noticed
            port.handoff.start()
            port.connect()
            client = port.clients[0]
            # Closed by the supervisor once its patience ran out: the client reads the end.
            assert client.recv(1) == b""
        assert any(entry["event"] == "connection_not_handed_over" for entry in logged)
    finally:
        port.close()


def test_a_worker_routed_away_is_handed_nothing_more(port: Port) -> None:
    retiring, first, second = port.workers
    port.handoff.route_to([retiring.channel])
    port.connect()
    assert len(retiring.take(1)) == 1

    port.handoff.route_to([first.channel, second.channel])  # a graceful restart's new workers
    port.connect(4)

    assert len(first.take(2)) == len(second.take(2)) == 2
    assert retiring.nothing_pending()


def test_after_stop_no_connection_is_accepted() -> None:
    port = Port()  # its hand-off started here, then stopped
    try:
        worker = port.workers[0]
        port.handoff.route_to([worker.channel])
        port.handoff.start()
        port.handoff.stop()

        port.connect()

        assert worker.nothing_pending()
    finally:
        port.close()


def test_a_full_worker_is_passed_over(port: Port) -> None:
    stuck, free, _ = port.workers
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
    port.handoff.route_to([stuck.channel, free.channel])
    port.connect(3)

    assert peers(free.take(3)) == port.client_names()


# Out of descriptors, then given some back: the hand-off must outlive the failed accepts.
OUT_OF_DESCRIPTORS = """
import os, socket, sys
from paysign.serving.handoff import HANDOFF_PATIENCE_SECONDS, ConnectionHandoff, worker_channel
listener = socket.create_server(("127.0.0.1", 0))
ours, theirs = worker_channel()
handoff = ConnectionHandoff(listener)
handoff.route_to([ours])
spare = []
while True:
    try:
        spare.append(os.dup(0))
    except OSError:
        break
handoff.start()
print(listener.getsockname()[1], flush=True)
sys.stdin.readline()  # the client has connected, and accept() failed meanwhile
for fd in spare:
    os.close(fd)
theirs.settimeout(10)
_, fds, _, _ = socket.recv_fds(theirs, 1, 1)
print("handed", len(fds), flush=True)
handoff.stop()
"""


def test_a_failed_accept_is_logged_and_tried_again() -> None:
    limit = "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
    child = subprocess.Popen(
        [sys.executable, "-c", limit + OUT_OF_DESCRIPTORS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    port = int(child.stdout.readline())
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        time.sleep(0.5)  # a few accept attempts fail: no descriptor for the connection
        child.stdin.write("go\n")
        child.stdin.flush()
        logged = []  # structlog's default configuration: its lines on stdout
        while not (line := child.stdout.readline()).startswith("handed"):
            assert line, "the connection was never handed over"
            logged.append(line)
        assert line.split() == ["handed", "1"]
    child.communicate(timeout=30)
    assert any("accept_failed" in entry and "EMFILE" in entry for entry in logged)
