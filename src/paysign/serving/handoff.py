"""The supervisor's side of ``paysign serve --workers N``: it accepts every connection itself and
hands each to the next ready worker in turn, over a Unix socket per worker (``SCM_RIGHTS``).

Why not let the workers accept from the shared socket: their event loops accept every pending
connection each time they wake, so a client that opens its keep-alive connections in a burst (a
load balancer, a pool of agents, ``wrk``) finds nearly all of them on the first worker to wake,
and they stay there — 31 of 32 measured, the other worker idle. Node's cluster module hands
connections out from its primary process for the same reason.

The listening socket and its queue stay the supervisor's: while no worker is ready nothing is
accepted and connections wait in the kernel's queue; a worker that is retiring or has died is no
longer handed any, and a connection its socket refuses goes to the next worker.

    >>> listener = socket.create_server(("127.0.0.1", 0))
    >>> handoff = ConnectionHandoff(listener)
    >>> ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    >>> handoff.route_to([ours])
    >>> handoff.start()
    >>> client = socket.create_connection(listener.getsockname())
    >>> _, fds, _, _ = socket.recv_fds(theirs, 1, 1)
    >>> len(fds)
    1
    >>> handoff.stop()
    >>> for s in (client, ours, theirs, listener, *map(lambda fd: socket.socket(fileno=fd), fds)):
    ...     s.close()
"""

from __future__ import annotations

import errno
import socket
import threading
import time

import structlog

log = structlog.get_logger("paysign.supervisor")

#: How often the accepting thread looks whether it should stop.
POLL_SECONDS = 0.1
#: How long an accepted connection waits for a worker to take it before it is closed.
HANDOFF_PATIENCE_SECONDS = 5.0
#: The pause between two tries to hand one connection over.
RETRY_SECONDS = 0.01
#: accept() errors about one connection, gone already: the next is accepted at once. After any
#: other (out of descriptors or memory) the connection is still queued: accepting again at once
#: would only spin.
_CONNECTION_GONE = frozenset({errno.ECONNABORTED, errno.EPROTO})


def worker_channel() -> tuple[socket.socket, socket.socket]:
    """A connected pair: the supervisor's end, the worker's end."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    return ours, theirs


class ConnectionHandoff:
    """Accepts on ``listener`` in a thread of its own and sends each connection to the next of
    the channels ``route_to`` names; one that none takes within ``patience`` seconds is closed."""

    def __init__(
        self, listener: socket.socket, *, patience: float = HANDOFF_PATIENCE_SECONDS
    ) -> None:
        self._listener = listener
        self._patience = patience
        self._targets: list[socket.socket] = []
        self._next = 0
        # Held while a connection is sent: once route_to returns, no send to a channel it
        # dropped is under way (a retiring worker gets nothing after its SIGTERM).
        self._lock = threading.Lock()
        self._routable = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paysign-handoff", daemon=True)

    def route_to(self, channels: list[socket.socket]) -> None:
        """From now on, hand connections to these channels' workers, in turn."""
        with self._lock:
            self._targets = list(channels)
            if self._targets:
                self._routable.set()
            else:
                self._routable.clear()

    def start(self) -> None:
        self._listener.settimeout(POLL_SECONDS)
        self._thread.start()

    def stop(self) -> None:
        """No connection is accepted after this returns."""
        self._stopping.set()
        self._routable.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        # Nothing but stop() may end this loop: without it the port answers no one.
        while not self._stopping.is_set():
            if not self._routable.wait(POLL_SECONDS) or self._stopping.is_set():
                continue
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                log.warning("accept_failed", error=errno.errorcode.get(exc.errno or 0, "?"))
                if exc.errno not in _CONNECTION_GONE:
                    time.sleep(POLL_SECONDS)
                continue
            try:
                with connection:
                    self._hand_over(connection)
            except Exception:  # this connection is lost; the next ones must not be
                log.exception("handoff_failed")

    def _hand_over(self, connection: socket.socket) -> None:
        deadline = time.monotonic() + self._patience
        # Every worker refused it (full or gone) or none is ready: the supervisor routes anew
        # within a tick of a worker's death or readiness.
        while not self._send(connection):
            if time.monotonic() > deadline or self._stopping.wait(RETRY_SECONDS):
                # The client sees its connection closed, as it would had the server gone.
                log.warning("connection_not_handed_over")
                return

    def _send(self, connection: socket.socket) -> bool:
        with self._lock:
            for _ in range(len(self._targets)):
                channel = self._targets[self._next % len(self._targets)]
                self._next += 1
                try:
                    socket.send_fds(channel, [b"c"], [connection.fileno()])
                    return True
                except OSError:  # full (a stuck worker) or closed (a dead one): the next one
                    continue
        return False
