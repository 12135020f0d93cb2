"""A signed-in account's credentials and what they let in: changing the password, resetting the
authenticator, ending other sessions, disconnecting connected assistants (OAuth grants)."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pyotp
from sqlalchemy.engine import Connection

from paysign.custody import SealedSecret, SecretUnreadable
from paysign.services import accounts
from paysign.services.portal_deps import PortalDeps
from paysign.services.portal_sign_in import authenticator_uri
from paysign.services.sessions import Session, digest
from paysign.services.sign_in import CredentialsRefused, matching_step
from paysign.store import assistant_grants_repo, portal_repo, sign_in_repo

AUTHENTICATOR_RESET_TTL = 600
RESET_EXPIRED = "This authenticator reset has expired. Start again; nothing was changed."


@dataclass(frozen=True, slots=True)
class SignedOut:
    """What a credential change ended elsewhere."""

    sessions: int
    assistants: int

    def __str__(self) -> str:
        return (
            f"{self.sessions} other session(s) signed out, "
            f"{self.assistants} connected assistant(s) disconnected."
        )


def _signed_in(session: Session) -> str:
    assert session.account_id is not None
    return session.account_id


def change_password(
    deps: PortalDeps, session: Session, current: str, new: str, code: str
) -> SignedOut:
    """Current password and a fresh code, then the new password; every other session of
    the account ends and every connected assistant (OAuth grant) is disconnected. Raises
    ``CredentialsRefused`` or ``InvalidAccountInput``."""
    account_id = _signed_in(session)
    accounts.require_password_length(new)  # before a code is spent
    deps.credentials.fresh_code(account_id, code, password=current)
    with deps.db.write() as conn:
        portal_repo.set_password_hash(conn, account_id, accounts.hash_password(new))
        return _sign_out_everywhere_else(deps, conn, session)


# ---- resetting the authenticator: two steps ----


def _reset_context(session: Session) -> str:
    return f"totp-reset:{session.account_id}:{digest(session.id)}"


def start_authenticator_reset(
    deps: PortalDeps, session: Session, password: str, code: str
) -> tuple[str, str, str]:
    """The password and a fresh code of the current authenticator; returns a new secret,
    its ``otpauth://`` URI and a token for :func:`confirm_authenticator_reset`. Nothing is
    changed yet. Raises ``CredentialsRefused``."""
    account_id = _signed_in(session)
    deps.credentials.fresh_code(account_id, code, password=password)
    secret = pyotp.random_base32()
    expires = deps.clock.now() + AUTHENTICATOR_RESET_TTL
    # Sealed for this session only: the confirmation cannot bring a secret of its own.
    sealed = deps.vault.seal(_reset_context(session), f"{expires}:{secret}".encode())
    token = base64.urlsafe_b64encode(sealed.to_bytes()).decode()
    uri = authenticator_uri(secret, accounts.email_of(deps.db, account_id))
    return secret, uri, token


def confirm_authenticator_reset(
    deps: PortalDeps, session: Session, token: str, code: str
) -> SignedOut:
    """A code from the new authenticator: the new secret replaces the old one, every other
    session ends and every assistant is disconnected. Raises ``CredentialsRefused``."""
    account_id = _signed_in(session)
    try:
        sealed = SealedSecret.from_bytes(base64.urlsafe_b64decode(token.encode()))
        expires, _, secret = (
            deps.vault.open(_reset_context(session), sealed).decode().partition(":")
        )
    except (SecretUnreadable, ValueError):
        raise CredentialsRefused(RESET_EXPIRED) from None
    if int(expires) <= deps.clock.now():
        raise CredentialsRefused(RESET_EXPIRED)
    step = matching_step(secret, code, deps.clock.now())
    if step is None:
        raise CredentialsRefused(
            "That code is not from the new authenticator. Nothing was changed."
        )
    sealed_new = deps.vault.seal(accounts.totp_context(account_id), secret.encode())
    with deps.db.write() as conn:
        portal_repo.set_sealed_totp_secret(conn, account_id, sealed_new.to_bytes())
        sign_in_repo.accept_totp_step(conn, account_id, step)  # this code is now used
        return _sign_out_everywhere_else(deps, conn, session)


def _sign_out_everywhere_else(deps: PortalDeps, conn: Connection, session: Session) -> SignedOut:
    # A changed credential may mean the old one leaked: whoever holds it, in another
    # browser or as an OAuth grant made with it, is out.
    account_id = _signed_in(session)
    return SignedOut(
        portal_repo.delete_account_sessions(conn, account_id, keep=digest(session.id)),
        assistant_grants_repo.revoke_account_tokens(conn, account_id, deps.clock.now()),
    )


# ---- sessions and assistants ----


def end_other_sessions(deps: PortalDeps, session: Session) -> int:
    return deps.sessions.end_others(session)


def connected_assistants(deps: PortalDeps, account_id: str) -> int:
    with deps.db.read() as conn:
        return assistant_grants_repo.connected_assistants(conn, account_id, deps.clock.now())


def disconnect_assistants(deps: PortalDeps, account_id: str, client_id: str = "") -> int:
    """Revoke every OAuth grant of the account, or only those of the client ``client_id``
    (tightening: no code needed); returns how many live grants that disconnected (0 for a
    client holding none of this account's)."""
    now = deps.clock.now()
    with deps.db.write() as conn:
        if client_id:
            return assistant_grants_repo.revoke_client_tokens(conn, account_id, client_id, now)
        return assistant_grants_repo.revoke_account_tokens(conn, account_id, now)
