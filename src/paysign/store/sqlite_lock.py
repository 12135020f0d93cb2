"""Writers to one SQLite file queue on a lock file beside it, across processes.

A ``BEGIN IMMEDIATE`` that finds the file locked waits in SQLite's busy handler, which sleeps
1, 2, 5 … 100 ms between attempts: a writer often sleeps long after the lock is free. A process
blocked in ``flock`` is woken the moment the holder lets go, so it waits only as long as the
transaction ahead of it. ``BEGIN IMMEDIATE`` and the busy timeout stay: they still guard against
writers that do not take this lock (migrations, the ``sqlite3`` shell).

Every handle a process opens on one database shares one descriptor and one re-entrant thread
lock: two descriptors of one process would exclude each other too, and a thread that already
holds the lock (a write nested in another) must not wait for itself.

    >>> import tempfile
    >>> lock = WriterLock(Path(tempfile.mkdtemp()) / "paysign.db")
    >>> with lock.held(), lock.held():
    ...     pass
    >>> lock.close()
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from paysign.datadir import make_private_file

LOCK_SUFFIX = "-writer.lock"


def writer_lock_path(database: Path) -> Path:
    """The lock file of the SQLite database at ``database``."""
    return database.with_name(database.name + LOCK_SUFFIX)


class _LockFile:
    """One open lock file of this process and the threads waiting for it."""

    def __init__(self, key: tuple[int, int], descriptor: int) -> None:
        self.key = key
        self.descriptor = descriptor
        self.handles = 0
        self._threads = threading.RLock()
        self._depth = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._threads:
            if self._depth == 0:
                fcntl.flock(self.descriptor, fcntl.LOCK_EX)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    fcntl.flock(self.descriptor, fcntl.LOCK_UN)


_open_files: dict[tuple[int, int], _LockFile] = {}
_open_files_guard = threading.Lock()


def _open(path: Path) -> _LockFile:
    make_private_file(path)
    # Close-on-exec: a child process holding a copy of the descriptor would keep a lock held
    # after this process died.
    descriptor = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    st = os.fstat(descriptor)
    key = (st.st_dev, st.st_ino)
    with _open_files_guard:
        shared = _open_files.get(key)
        if shared is None:
            shared = _open_files[key] = _LockFile(key, descriptor)
        else:
            os.close(descriptor)
        shared.handles += 1
        return shared


def _release(shared: _LockFile) -> None:
    with _open_files_guard:
        shared.handles -= 1
        if shared.handles == 0:
            del _open_files[shared.key]
            os.close(shared.descriptor)


class WriterLock:
    """A handle on the lock of one SQLite database file: ``held()`` around each write
    transaction. The lock file is opened (0600) on first use and closed by ``close()``; a
    closed handle opens it again when used."""

    def __init__(self, database: Path) -> None:
        self.path = writer_lock_path(database)
        self._file: _LockFile | None = None
        self._guard = threading.Lock()

    def open(self) -> None:
        self._opened()

    def _opened(self) -> _LockFile:
        with self._guard:
            if self._file is None:
                self._file = _open(self.path)
            return self._file

    @contextmanager
    def held(self) -> Iterator[None]:
        """Blocks until no other process writes, however long its transaction takes."""
        with self._opened().held():
            yield

    def close(self) -> None:
        with self._guard:
            if self._file is not None:
                _release(self._file)
                self._file = None
