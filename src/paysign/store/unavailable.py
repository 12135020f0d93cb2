"""Which failures mean the database is unavailable for now, rather than that paysign is wrong.

An unreachable or restarting PostgreSQL, a pool with no connection to give, a SQLite file on
a full disk or behind an I/O error: the request did not happen and the same request may
succeed in a moment, so it is answered ``503`` with ``Retry-After``, not ``500``. A failure
counts when the exception, or one it was raised from or while handling, is one of these (SQLite
reports a full disk once, then refuses the ``ROLLBACK`` of the transaction it already undid).

    >>> import sqlite3
    >>> full = sqlite3.OperationalError("database or disk is full")
    >>> full.sqlite_errorcode = sqlite3.SQLITE_FULL
    >>> database_unavailable(full), database_unavailable(KeyError("x"))
    (True, False)
"""

from __future__ import annotations

import sqlite3

import psycopg
import sqlalchemy.exc

from paysign.store.postgres_reachability import DatabaseUnreachable

#: SQLite's primary result codes for a database that cannot be used now (and may be soon):
#: locked past the busy timeout, an I/O error, a full disk, a file that cannot be opened.
_SQLITE_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
    }
)
_SQLITE_MESSAGES = ("database or disk is full", "disk i/o error", "database is locked")


def database_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` reports the database unreachable, restarting or out of space."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _unavailable(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _unavailable(exc: BaseException) -> bool:
    if isinstance(
        exc, DatabaseUnreachable | psycopg.OperationalError | sqlalchemy.exc.TimeoutError
    ):
        # psycopg's OperationalError: no connection, one lost, the server shutting down or out
        # of disk (and the pool's PoolTimeout); never a statement of ours that is wrong.
        return True
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        return exc.connection_invalidated or (exc.orig is not None and _unavailable(exc.orig))
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF in _SQLITE_UNAVAILABLE
        return str(exc).lower().startswith(_SQLITE_MESSAGES)
    return False
