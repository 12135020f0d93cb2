"""Storage for the sign-in guards shared by the portal and the OAuth pages: each authenticator
code (TOTP step) accepted once per account, and fixed-window counters of failures. Every guard
is one statement, so it holds across processes sharing one database. Callers (the use cases)
own the transaction."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from paysign.store.schema import oauth_sign_in_failures, oauth_totp_steps


def _insert(conn: Connection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


# ---- authenticator codes ----


def accept_totp_step(conn: Connection, account_id: str, step: int) -> bool:
    """Record ``step`` as the account's last accepted TOTP step unless it (or a later one)
    was accepted before: a code is usable once."""
    row = oauth_totp_steps.c
    statement = (
        _insert(conn, oauth_totp_steps)
        .values(account_id=account_id, last_step=step)
        .on_conflict_do_update(
            index_elements=[row.account_id],
            set_={"last_step": step},
            where=row.last_step < step,
        )
        .returning(row.account_id)
    )
    return conn.execute(statement).first() is not None


def has_accepted_code(conn: Connection, account_id: str) -> bool:
    """Whether any authenticator code of the account was ever accepted (it is enrolled)."""
    row = oauth_totp_steps.c
    found = conn.execute(sa.select(row.last_step).where(row.account_id == account_id)).first()
    return found is not None


# ---- failure counters ----


def failures(conn: Connection, key: str, now: int, window: int) -> int:
    c = oauth_sign_in_failures.c
    found = conn.execute(
        sa.select(c.failures).where(c.key == key, c.window_start > now - window)
    ).scalar_one_or_none()
    return int(found or 0)


def count_event(conn: Connection, key: str, now: int, window: int) -> tuple[int, int]:
    """Count one event of the key in its fixed window, atomically; returns the count so far
    in the window, this one included, and when the window started. Concurrent callers each
    see a different count, so a limit checked on it holds exactly across processes."""
    row = oauth_sign_in_failures.c
    expired = row.window_start <= now - window
    statement = (
        _insert(conn, oauth_sign_in_failures)
        .values(key=key, window_start=now, failures=1)
        .on_conflict_do_update(
            index_elements=[row.key],
            set_={
                "window_start": sa.case((expired, now), else_=row.window_start),
                "failures": sa.case((expired, 1), else_=row.failures + 1),
            },
        )
        .returning(row.failures, row.window_start)
    )
    count, start = conn.execute(statement).one()
    return int(count), int(start)


def uncount_event(conn: Connection, key: str) -> None:
    """Take back one event counted by ``count_event`` (an attempt that turned out fine)."""
    c = oauth_sign_in_failures.c
    conn.execute(
        oauth_sign_in_failures.update()
        .where(c.key == key, c.failures > 0)
        .values(failures=c.failures - 1)
    )


def purge_counts(conn: Connection, prefix: str, ended_before: int) -> None:
    """Delete the counters of keys starting with ``prefix`` whose window started before."""
    c = oauth_sign_in_failures.c
    conn.execute(
        oauth_sign_in_failures.delete().where(
            c.key.startswith(prefix, autoescape=True), c.window_start < ended_before
        )
    )


def record_failure(conn: Connection, key: str, now: int, window: int) -> None:
    """Count one failure in the key's window (a new window once the old one is over)."""
    count_event(conn, key, now, window)


def clear_failures(conn: Connection, key: str) -> None:
    conn.execute(oauth_sign_in_failures.delete().where(oauth_sign_in_failures.c.key == key))
