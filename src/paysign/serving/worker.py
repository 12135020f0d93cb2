"""One worker of ``paysign serve --workers N``, started by the supervisor:

    python -m paysign.serving.worker CHANNEL_FD READY_FD SUPERVISOR_PID

It builds a runtime of its own (its own database pools, its own signer process), joins the dev
chain the supervisor runs, serves the connections the supervisor hands it over CHANNEL_FD
(``handoff``), writes one byte to READY_FD once it takes them, and stops as ``paysign serve``
does on SIGTERM/SIGINT.
It gets SIGTERM when the supervisor dies, so it never outlives it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys

from paysign.bootstrap import build_runtime
from paysign.chain.devchain import sandbox_chain
from paysign.config import Settings
from paysign.logging import configure_logging
from paysign.serving.process import StopSignals, serve

_PR_SET_PDEATHSIG = 1


def _die_with(supervisor_pid: int) -> None:
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the supervisor's stop still reaches us
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor_pid:  # it died before prctl took effect
        sys.exit(1)


def main(argv: list[str]) -> int:
    channel_fd, ready_fd, supervisor_pid = (int(arg) for arg in argv)
    _die_with(supervisor_pid)
    # What it creates in the data directory (the metrics' files among them) is private from
    # the start, not tightened afterwards.
    os.umask(0o077)
    settings = Settings()
    configure_logging(settings.log_level)
    channel = socket.socket(fileno=channel_fd)

    def ready() -> None:
        os.write(ready_fd, b"1")
        os.close(ready_fd)

    with StopSignals() as stop, sandbox_chain(settings) as settings:
        serve(build_runtime(settings), stop, handed=channel, on_started=ready)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
