"""A server's process tree, read from Linux's /proc: its CPU time, all its descendants
(workers, signer processes) included, which of a supervisor's workers take connections, and
how many of its clients' connections each holds.

It imports nothing from the rest of ``bench``: tests load it from its file.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

SIGNER_MODULE = b"paysign.custody.signer_worker"
WORKER_MODULE = b"paysign.serving.worker"


def own_cpu_split(pid: int) -> tuple[float, float] | None:
    """User and system CPU seconds of one process (Linux /proc), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def own_cpu_seconds(pid: int) -> float | None:
    """user + system CPU time of one process (Linux /proc), or None elsewhere."""
    split = own_cpu_split(pid)
    return None if split is None else sum(split)


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


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _is_signer(pid: int) -> bool:
    """Runs ``python -m paysign.custody.signer_worker`` (an argument, not any mention of it)."""
    return SIGNER_MODULE in _argv(pid)


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


def workers(supervisor_pid: int) -> list[int]:
    """The children of a supervisor that run ``python -m paysign.serving.worker``."""
    return [child for child in children(supervisor_pid) if WORKER_MODULE in _argv(child)]


def _channel_inode(worker_pid: int) -> int | None:
    """The inode of the socket a worker is handed its connections on (its first argument)."""
    argv = _argv(worker_pid)
    try:
        fd = int(argv[argv.index(WORKER_MODULE) + 1])
        target = os.readlink(f"/proc/{worker_pid}/fd/{fd}")
    except (ValueError, IndexError, OSError):
        return None
    if not target.startswith("socket:["):
        return None
    return int(target[len("socket:[") : -1])


def accepting_workers(supervisor_pid: int) -> int:
    """Workers of a supervisor whose event loop watches the socket they are handed their
    connections on: ready ones."""
    ready = 0
    for worker in workers(supervisor_pid):
        channel = _channel_inode(worker)
        ready += channel is not None and channel in _epoll_watched_inodes(worker)
    return ready


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
    """How many established connections to ``port`` each worker of a supervisor holds, most
    first; none for a lone server."""
    established = _established_inodes(port)
    counts = [len(established & _socket_inodes(worker)) for worker in workers(supervisor_pid)]
    return sorted(counts, reverse=True)
