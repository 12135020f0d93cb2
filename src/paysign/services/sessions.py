"""The portal's browser sessions: a random id in a cookie, stored only as its SHA-256, with a
CSRF token.

A session without an account carries the CSRF token of the sign-in and sign-up forms. Signing
in replaces it with a new session (a new id: no fixation). A session ends after
``idle`` seconds without a request or ``absolute`` seconds after it began.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from paysign.clock import Clock
from paysign.store import portal_repo
from paysign.store.database import Database

# Anonymous sessions (sign-in and sign-up forms) live at most this long.
ANONYMOUS_TTL = 3600
# ``last_seen_at`` is written at most this often: no write per page view.
TOUCH_RESOLUTION = 60


def digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


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
        session_id, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
        now = self.clock.now()
        with self.db.write() as conn:
            portal_repo.purge_sessions(conn, now, now - self.idle)
            portal_repo.insert_session(
                conn,
                digest(session_id),
                account_id=None,
                csrf=csrf,
                now=now,
                expires_at=now + min(ANONYMOUS_TTL, self.absolute),
            )
        return Session(session_id, None, csrf)

    def load(self, session_id: str | None) -> Session | None:
        """The live session with this id, or ``None`` (unknown, idle too long, or too old)."""
        if not session_id or len(session_id) > 100:
            return None
        now = self.clock.now()
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

    def replace(self, conn: Connection, old: Session | None, account_id: str) -> Session:
        """Inside the sign-in transaction: end ``old`` and begin a signed-in session."""
        if old is not None:
            portal_repo.delete_session(conn, digest(old.id))
        session_id, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
        now = self.clock.now()
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
