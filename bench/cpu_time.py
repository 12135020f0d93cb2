"""CPU time of a server process and of its signer process, read from Linux's /proc.

It imports nothing from the rest of ``bench``: tests load it from its file.
"""

from __future__ import annotations

import os
from pathlib import Path


def own_cpu_seconds(pid: int) -> float | None:
    """user + system CPU time of one process (Linux /proc), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def signer_children(pid: int) -> list[int]:
    """The server's signer processes (``custody.signer_worker``): part of its cost."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"signer_worker" in cmdline:
                found.append(int(child))
    return found


def process_cpu_seconds(pid: int) -> float | None:
    """CPU time of a server: its own, and its signer process's."""
    own = own_cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(own_cpu_seconds(child) or 0.0 for child in signer_children(pid))
