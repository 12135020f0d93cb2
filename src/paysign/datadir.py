"""The data directory is the service user's alone: 0700, every directory in it 0700, every file
0600. It holds the wallet database, the master key and the dev chain's state, and the default
umask (0022) would leave all of it readable by every local user.

``secure_data_dir`` makes a new directory private and tightens one the operator made looser,
logging each change. Anything in it owned by another user is refused with
:class:`DataDirExposed`, whatever its mode: its owner can change the mode back, read it, or have
planted it (a master key they know would seal every new wallet for them). Symbolic links,
sockets and other special files are left alone: a link's target is not ours to change, and
sockets hold no data.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> secure_data_dir(root / "var")
    >>> oct((root / "var").stat().st_mode & 0o777)
    '0o700'
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

import structlog

log = structlog.get_logger("paysign.datadir")

DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600
#: Left as found for custody to judge: a master key others could read may already have leaked,
#: so ``custody.master_key`` refuses it (the operator rotates, or vouches for it with chmod)
#: rather than have it quietly fixed here.
_JUDGED_BY_CUSTODY: Final = frozenset({"master.key"})


class DataDirExposed(RuntimeError):
    """A path in the data directory is open to other users and cannot be made private."""


def secure_data_dir(path: Path) -> None:
    """Create ``path`` (0700) if missing; make it and everything in it private."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    _tighten(path, path.stat(), DIR_MODE, path)  # a symlinked data dir: its target is the dir
    for root, dirs, files in os.walk(path):  # top-down: a directory is private before its walk
        for name in [*dirs, *files]:
            if root == str(path) and name in _JUDGED_BY_CUSTODY:
                continue
            entry = Path(root, name)
            try:
                st = entry.lstat()
            except FileNotFoundError:
                continue  # another process's temporary file, already renamed
            if stat.S_ISDIR(st.st_mode):
                _tighten(entry, st, DIR_MODE, path)
            elif stat.S_ISREG(st.st_mode):
                _tighten(entry, st, FILE_MODE, path)


def make_private_file(path: Path) -> None:
    """Create ``path`` 0600 if missing, else tighten it to 0600 (refused if another user's).

    SQLite gives a database's ``-wal`` and ``-shm`` files the database file's mode, so a
    database file created this way before SQLite opens it keeps its companions private too.
    """
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        st = os.fstat(descriptor)
        _refuse_unless_ours(path, st, path.parent)
        mode = stat.S_IMODE(st.st_mode)
        if mode & ~FILE_MODE:
            os.fchmod(descriptor, mode & FILE_MODE)
            log.warning("data_file_tightened", path=str(path), was=f"{mode:04o}")
    finally:
        os.close(descriptor)


def tighten_file(path: Path) -> None:
    """Tighten an existing file to 0600 (nothing when missing or not a regular file)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        _tighten(path, st, FILE_MODE, path)


def _tighten(path: Path, st: os.stat_result, wanted: int, data_dir: Path) -> None:
    _refuse_unless_ours(path, st, data_dir)
    mode = stat.S_IMODE(st.st_mode)
    if not mode & ~wanted:
        return
    os.chmod(path, mode & wanted)
    log.warning("data_dir_tightened", path=str(path), was=f"{mode:04o}", now=f"{mode & wanted:04o}")


def _refuse_unless_ours(path: Path, st: os.stat_result, data_dir: Path) -> None:
    """Raise ``DataDirExposed`` unless ``st`` (of ``path``) belongs to the effective user.

    Checked whatever the mode: a tight mode on another user's file proves nothing, since its
    owner may change it at will, and a file someone else made may hold what they chose.
    """
    uid = os.geteuid()
    if st.st_uid != uid:
        raise DataDirExposed(
            f"{path} belongs to uid {st.st_uid}, not to the service's user (uid {uid}); "
            f"nothing in the data directory may be owned by other users: its owner could read "
            f"or replace the wallet keys and the database (a master key they planted would seal "
            f"every new wallet under a key they know). If you made it, fix it with: "
            f"chown -R {uid} {data_dir}; if you did not, remove it and let the service's user "
            f"create the data directory afresh"
        )


def fsync_directory(directory: Path) -> None:
    """Make a file just renamed or created in ``directory`` survive a power loss: the file's
    own fsync does not cover its name. Some platforms cannot fsync a directory; the file itself
    is synced already, so that is not an error."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
