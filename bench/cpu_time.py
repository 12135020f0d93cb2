"""A server's process tree, read from Linux's /proc: its CPU time, all its descendants
(workers, signer processes) included, which of a supervisor's workers accept connections, and
how many of its clients' connections each holds.

It imports nothing from the rest of ``bench``: tests load it from its file.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

SIGNER_MODULE = b"paysign.custody.signer_worker"


def own_cpu_seconds(pid: int) -> float | None:
    """user + system CPU time of one process (Linux /proc), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (every thread's children)."""
    found: list[int] = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found.extend(int(child) for child in listing.read_text().split())
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Children, grandchildren and so on: a supervisor's workers and their signer processes."""
    found: list[int] = []
    pending = children(pid)
    while pending:
        child = pending.pop()
        if child not in found:
            found.append(child)
            pending.extend(children(child))
    return found


def _is_signer(pid: int) -> bool:
    """Runs ``python -m paysign.custody.signer_worker`` (an argument, not any mention of it)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return SIGNER_MODULE in argv


def signer_children(pid: int) -> list[int]:
    """The server's signer processes (``custody.signer_worker``): part of its cost."""
    return [child for child in children(pid) if _is_signer(child)]


def signer_descendants(pid: int) -> list[int]:
    """Every signer process under ``pid``: one per worker of a supervisor."""
    return [child for child in descendants(pid) if _is_signer(child)]


def process_cpu_seconds(pid: int) -> float | None:
    """CPU time of a server: its own and that of all its descendants."""
    own = own_cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(own_cpu_seconds(child) or 0.0 for child in descendants(pid))


def cpu_seconds_without_signers(pid: int) -> float | None:
    """CPU time of a server and its descendants, its signer processes left out."""
    own = own_cpu_seconds(pid)
    if own is None:
        return None
    others = [child for child in descendants(pid) if not _is_signer(child)]
    return own + sum(own_cpu_seconds(child) or 0.0 for child in others)


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def _epoll_watched_inodes(pid: int) -> set[int]:
    """Inodes of the files an epoll of ``pid`` watches (``ino:`` of its ``tfd:`` lines)."""
    inodes = set()
    for info in Path(f"/proc/{pid}/fdinfo").glob("*"):
        with contextlib.suppress(OSError):
            for line in info.read_text().splitlines():
                if line.startswith("tfd:") and " ino:" in line:
                    inodes.add(int(line.split(" ino:")[1].split()[0], 16))
    return inodes


def accepting_workers(supervisor_pid: int) -> int:
    """Children of a supervisor whose event loop watches its listening socket: ready ones."""
    listening = _socket_inodes(supervisor_pid)
    return sum(bool(listening & _epoll_watched_inodes(child)) for child in children(supervisor_pid))


def _established_inodes(port: int) -> set[int]:
    """Inodes of the established TCP connections whose local port is ``port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                if local_port == port and fields[3] == "01":  # TCP_ESTABLISHED
                    inodes.add(int(fields[9]))
    return inodes


def connections_per_worker(supervisor_pid: int, port: int) -> list[int]:
    """How many established connections to ``port`` each worker of a supervisor holds (its
    children given the supervisor's sockets), most first; none for a lone server."""
    established = _established_inodes(port)
    listening = _socket_inodes(supervisor_pid)
    counts = []
    for child in children(supervisor_pid):
        sockets = _socket_inodes(child)
        if sockets & listening:
            counts.append(len(established & sockets))
    return sorted(counts, reverse=True)
