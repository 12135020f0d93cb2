"""The log-sync process: puts a SQLite write-ahead log on the disk for the service.

Run by ``store.wal_sync`` as ``python -m paysign.store.wal_sync_worker <log path>``; nothing
else talks to it. Its wire, over its stdin and stdout (pipes the service owns):

* it writes one byte, ``READY``, once it runs;
* for each byte it reads it writes one back, ``SYNCED`` or ``FAILED``, in order, once an
  ``fdatasync`` of the log that began after that byte was read has returned. Bytes read together
  share one ``fdatasync``: each was written after the commits it stands for had returned, so
  the flush covers them all;
* it exits when its stdin closes, which is also what happens when the service dies.

It opens the log by its path and opens it again when the file there is another one (the log is
removed when the database's last connection closes, and made anew by the next): a flush of a
file no longer in use would put nothing on the disk. It reads nothing from the log, logs
nothing, and ignores Ctrl-C: the service decides when it ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from paysign.helper_process import write_all

READY = b"\x01"
SYNCED = b"."
FAILED = b"!"


class LogFile:
    """The log file, open for as long as it is the one at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.inode: tuple[int, int] | None = None

    def sync(self) -> bool:
        """Flush the log now at ``path``; ``False`` when that fails (nothing to flush, an I/O
        error: the service must not answer what it stood for)."""
        try:
            found = os.stat(self.path)
            inode = (found.st_dev, found.st_ino)
            if inode != self.inode:
                self.close()
                self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                self.inode = inode
            assert self.fd is not None
            os.fdatasync(self.fd)
        except OSError:
            self.close()
            return False
        return True

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.fd = self.inode = None


def serve(path: str, read_fd: int, write_fd: int) -> None:
    log = LogFile(path)
    write_all(write_fd, READY)
    while True:
        asked = os.read(read_fd, 4096)
        if not asked:
            return
        answer = SYNCED if log.sync() else FAILED
        write_all(write_fd, answer * len(asked))


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(BrokenPipeError):  # the service went first: nobody to answer
        serve(sys.argv[1], 0, 1)
