"""A TCP relay on 127.0.0.1 in front of a real server, with the faults of a network in between.

``pause()`` stops forwarding bytes in both directions while every connection stays open (a host
that drops packets: the client waits, nothing tells it to give up); ``resume()`` delivers what
was held and forwards again. ``refuse()`` drops every connection and closes each new one at
once (a server that is down); ``resume()`` ends that too.
"""

from __future__ import annotations

import contextlib
import socket
import threading

import sqlalchemy as sa


class StallProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)  # so the acceptor notices close()
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._refusing = False
        self._closed = False
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        #: How many reads are held by a pause, undelivered: a client is waiting on the stall.
        self.holding = 0
        self._acceptor = threading.Thread(target=self._accept, name="stall-proxy", daemon=True)
        self._acceptor.start()

    def __enter__(self) -> StallProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url_through(self, url: str) -> str:
        """``url`` (a SQLAlchemy URL to ``target``) with its host and port this relay's."""
        through = sa.engine.make_url(url).set(host="127.0.0.1", port=self.port)
        return through.render_as_string(hide_password=False)

    def pause(self) -> None:
        self._flowing.clear()

    def refuse(self) -> None:
        self._refusing = True
        self._drop_all()

    def resume(self) -> None:
        self._refusing = False
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        self._acceptor.join()
        self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a pump blocked in recv()
            sock.close()

    def _accept(self) -> None:
        with self._listener:
            while not self._closed:
                try:
                    client, _ = self._listener.accept()
                except TimeoutError:
                    continue
                client.settimeout(None)
                if self._refusing:
                    client.close()
                    continue
                upstream = socket.create_connection(self.target)
                with self._lock:
                    self._sockets |= {client, upstream}
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(
                        target=self._pump, args=(source, sink), name="stall-proxy", daemon=True
                    ).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self._flowing.is_set():
                    with self._lock:
                        self.holding += 1
                    self._flowing.wait()
                    with self._lock:
                        self.holding -= 1
                if self._closed or self._refusing:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
