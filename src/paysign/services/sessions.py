"""The portal's browser sessions: a random id in a cookie, stored only as its SHA-256, with a
CSRF token.

A session without an account carries the CSRF token of the sign-in and sign-up forms. It is
not stored: its id holds when it began and its token is derived from the id, so a visit
without a cookie writes nothing (a flood of them neither grows the database nor takes its
write lock from the payments). It is as strong as a stored one: whoever can put an id of
their own in a browser's cookie could as well have asked the server for a stored one, and it
grants nothing. Signing in replaces it with a new, stored session (a new id: no fixation). A
session ends after ``idle`` seconds without a request or ``absolute`` seconds after it began.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from paysign.clock import Clock
from paysign.store import portal_repo
from paysign.store.database import Database

# Anonymous sessions (sign-in and sign-up forms) live at most this long.
ANONYMOUS_TTL = 3600
_ANONYMOUS = "anon."  # then the second it began, a dot, and 32 random bytes
_ANONYMOUS_ID = re.compile(r"anon\.([0-9]{1,12})\.[A-Za-z0-9_-]{43}")
# ``last_seen_at`` is written at most this often: no write per page view.
TOUCH_RESOLUTION = 60


def digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _anonymous_csrf(session_id: str) -> str:
    # A one-way function of the id: the token, shown in every form, does not give the
    # cookie's id away.
    mac = hashlib.sha256(b"paysign anonymous csrf\0" + session_id.encode()).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    account_id: str | None
    csrf: str

    def csrf_ok(self, token: str) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf.encode(), token.encode())


class Sessions:
    def __init__(self, db: Database, clock: Clock, *, idle: int, absolute: int) -> None:
        self.db = db
        self.clock = clock
        self.idle = idle
        self.absolute = absolute

    def start_anonymous(self) -> Session:
        """A session for the sign-in and sign-up forms; nothing is written."""
        session_id = f"{_ANONYMOUS}{self.clock.now()}.{secrets.token_urlsafe(32)}"
        return Session(session_id, None, _anonymous_csrf(session_id))

    def load(self, session_id: str | None) -> Session | None:
        """The live session with this id, or ``None`` (unknown, idle too long, or too old)."""
        if not session_id or len(session_id) > 100:
            return None
        now = self.clock.now()
        if session_id.startswith(_ANONYMOUS):
            return self._anonymous(session_id, now)
        id_hash = digest(session_id)
        with self.db.read() as conn:
            row = portal_repo.find_session(conn, id_hash)
        if row is None:
            return None
        if row.expires_at <= now or row.last_seen_at <= now - self.idle:
            with self.db.write() as conn:
                portal_repo.delete_session(conn, id_hash)
            return None
        if now - row.last_seen_at >= TOUCH_RESOLUTION:
            with self.db.write() as conn:
                portal_repo.touch_session(conn, id_hash, now)
        return Session(session_id, row.account_id, row.csrf)

    def _anonymous(self, session_id: str, now: int) -> Session | None:
        well_formed = _ANONYMOUS_ID.fullmatch(session_id)
        if well_formed is None:
            return None
        if not now - min(ANONYMOUS_TTL, self.absolute) < int(well_formed[1]) <= now + 60:
            return None
        return Session(session_id, None, _anonymous_csrf(session_id))

    def replace(self, conn: Connection, old: Session | None, account_id: str) -> Session:
        """Inside the sign-in transaction: end ``old`` and begin a signed-in session (and
        drop the sessions that have ended since the last sign-in)."""
        now = self.clock.now()
        portal_repo.purge_sessions(conn, now, now - self.idle)
        if old is not None and not old.id.startswith(_ANONYMOUS):
            portal_repo.delete_session(conn, digest(old.id))
        session_id, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
        portal_repo.insert_session(
            conn,
            digest(session_id),
            account_id=account_id,
            csrf=csrf,
            now=now,
            expires_at=now + self.absolute,
        )
        return Session(session_id, account_id, csrf)

    def end(self, session: Session) -> None:
        if session.id.startswith(_ANONYMOUS):
            return  # never stored
        with self.db.write() as conn:
            portal_repo.delete_session(conn, digest(session.id))

    def end_others(self, session: Session) -> int:
        """Sign out every other session of the account."""
        if session.account_id is None:
            return 0
        with self.db.write() as conn:
            return portal_repo.delete_account_sessions(
                conn, session.account_id, keep=digest(session.id)
            )
