"""One server process: the app built from a runtime and served by uvicorn until SIGTERM or
SIGINT, then stopped cleanly.

uvicorn drains on either signal and then raises it again once its own handlers are gone. With
the default SIGTERM action that re-raise killed the process before the caller's clean-up (the
dev chain's final save, the runtime's disposal) ran, and SIGINT became a KeyboardInterrupt.
``StopSignals`` keeps a handler of ours under uvicorn's, so the re-raised signal lands on it and
``serve`` returns normally: SIGTERM (systemd's stop) is as clean as Ctrl-C, exit status 0.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import cast

import uvicorn

from paysign.background import start_background_jobs
from paysign.bootstrap import Runtime
from paysign.server_start import tune_gc_for_serving
from paysign.serving.bounded_head import BoundedHeadProtocol
from paysign.serving.handed_connections import HandedConnections

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """While entered, SIGTERM and SIGINT only ask the server to stop (``requested``)."""

    def __init__(self) -> None:
        self.requested = False
        self.server: uvicorn.Server | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _handle(self, sig: int, frame: FrameType | None) -> None:
        # Before uvicorn serves (start-up still running) or after it stopped: either way the
        # server must not (or no longer) answer.
        self.requested = True
        if self.server is not None:
            self.server.should_exit = True


class _Server(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        on_started: Callable[[], None] | None,
        handed: socket.socket | None,
    ) -> None:
        super().__init__(config)
        self._on_started = on_started
        self._handed = handed

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._handed is not None:
            await self._serve_handed(self._handed)
        if self.started and self._on_started is not None:
            self._on_started()

    async def _serve_handed(self, channel: socket.socket) -> None:
        config = self.config

        def factory() -> asyncio.Protocol:
            # What uvicorn's own startup gives each connection's protocol (typed as a bare
            # asyncio.Protocol class there too).
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state
            )

        handed = HandedConnections(asyncio.get_running_loop(), channel, factory)
        await handed.start_serving()
        # uvicorn's shutdown only closes its servers and waits for them to be closed.
        self.servers.append(cast(asyncio.Server, handed))


def serve(
    runtime: Runtime,
    stop: StopSignals,
    *,
    handed: socket.socket | None = None,
    on_started: Callable[[], None] | None = None,
) -> None:
    """Serve until a stop signal, then stop the background jobs and dispose of the runtime
    (the signer process, the database pools). ``handed``: serve the connections a supervisor
    hands over this channel (``handoff``), listening on no port; ``on_started``: called once
    the server takes connections."""
    from paysign.app import create_app

    settings = runtime.settings
    try:
        app = create_app(runtime)
        stop_jobs = start_background_jobs(runtime)
        try:
            config = uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                log_config=None,
                access_log=False,
                loop="auto",
                http=BoundedHeadProtocol,
                lifespan="off",
                **settings.uvicorn_proxy_options(),
            )
            server = _Server(config, on_started, handed)
            stop.server = server
            server.should_exit = stop.requested
            tune_gc_for_serving()
            # An empty list for a worker, which listens on no port: given None, uvicorn binds one.
            server.run(sockets=None if handed is None else [])
        finally:
            stop_jobs()
    finally:
        runtime.db.dispose()
