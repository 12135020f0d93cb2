"""What an operator does to accounts: list them, disable and enable them, and give a holder who
lost their authenticator a new one, or who forgot their password a new password.

Disabling deletes nothing: the account's API keys and OAuth grants stay as they are and are
refused while it is disabled (the signing path's key lookup and the token lookup check the
flag in the statement they already run), and its portal sessions end. Enabling undoes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyotp

from paysign.clock import Clock
from paysign.custody import KeyVault
from paysign.services.accounts import (
    hash_password,
    require_account,
    require_password_length,
    totp_context,
)
from paysign.store import assistant_grants_repo, portal_repo
from paysign.store import repositories as repo
from paysign.store.database import Database

AccountSummary = repo.AccountSummary


@dataclass(frozen=True, slots=True)
class Disabled:
    email: str
    changed: bool  # False when the account already was disabled
    sessions_ended: int


@dataclass(frozen=True, slots=True)
class AuthenticatorReset:
    email: str
    totp_secret: str  # base32; shown once, for the holder to enrol again
    sessions_ended: int
    grants_revoked: int


@dataclass(frozen=True, slots=True)
class PasswordReset:
    email: str
    sessions_ended: int
    grants_revoked: int


def list_accounts(db: Database, clock: Clock) -> list[AccountSummary]:
    with db.read() as conn:
        return repo.list_accounts(conn, clock.now())


def disable_account(db: Database, clock: Clock, *, email: str) -> Disabled:
    account = require_account(db, email)
    with db.write() as conn:
        changed = repo.set_disabled(conn, account.id, clock.now())
        # Sessions are not the account's data: they are what lets a browser in right now.
        ended = portal_repo.delete_account_sessions(conn, account.id)
    return Disabled(account.email, changed, ended)


def enable_account(db: Database, *, email: str) -> bool:
    """``False`` when the account was not disabled."""
    account = require_account(db, email)
    with db.write() as conn:
        return repo.set_disabled(conn, account.id, None)


def reset_authenticator(
    db: Database, vault: KeyVault, clock: Clock, *, email: str
) -> AuthenticatorReset:
    """A new authenticator secret replaces the old one; every portal session ends and every
    OAuth grant is revoked, since whoever holds the old authenticator may be signed in."""
    account = require_account(db, email)
    secret = pyotp.random_base32()
    sealed = vault.seal(totp_context(account.id), secret.encode()).to_bytes()
    with db.write() as conn:
        portal_repo.set_sealed_totp_secret(conn, account.id, sealed)
        ended = portal_repo.delete_account_sessions(conn, account.id)
        revoked = assistant_grants_repo.revoke_account_tokens(conn, account.id, clock.now())
    return AuthenticatorReset(account.email, secret, ended, revoked)


def reset_password(db: Database, clock: Clock, *, email: str, password: str) -> PasswordReset:
    """``password`` replaces the holder's; as for a change in the portal, every portal session
    ends and every OAuth grant is revoked (whoever knew the old one may be signed in). The
    authenticator stays: signing in still needs its code. Raises ``InvalidAccountInput``."""
    require_password_length(password)
    account = require_account(db, email)
    with db.write() as conn:
        portal_repo.set_password_hash(conn, account.id, hash_password(password))
        ended = portal_repo.delete_account_sessions(conn, account.id)
        revoked = assistant_grants_repo.revoke_account_tokens(conn, account.id, clock.now())
    return PasswordReset(account.email, ended, revoked)
