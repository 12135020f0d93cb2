"""Signing up and signing in to the portal: the shared credential check, then a new account or
a new signed-in session."""

from __future__ import annotations

import pyotp
from sqlalchemy.engine import Connection

from paysign.errors import AccountAlreadyExists
from paysign.services import accounts
from paysign.services.portal_deps import PortalDeps
from paysign.services.sessions import Session
from paysign.services.sign_in import TOTP_STEP
from paysign.store.repositories import AccountRecord


def authenticator_uri(secret: str, email: str) -> str:
    """The ``otpauth://`` URI an authenticator app enrols ``secret`` from."""
    return pyotp.TOTP(secret, interval=TOTP_STEP).provisioning_uri(
        name=email, issuer_name="paysign"
    )


def sign_in(
    deps: PortalDeps,
    session: Session | None,
    email: str,
    password: str,
    code: str,
    address: str,
) -> Session:
    """A new signed-in session; raises ``CredentialsRefused``."""
    created: list[Session] = []

    def replace(conn: Connection, account: AccountRecord) -> None:
        created.append(deps.sessions.replace(conn, session, account.id))

    deps.credentials.sign_in(email, password, code, address, on_success=replace)
    return created[0]


def sign_up(
    deps: PortalDeps, email: str, password: str, address: str
) -> tuple[accounts.CreatedAccount, str]:
    """A new account and wallet, with the ``otpauth://`` URI of its authenticator secret;
    or, for an account never enrolled and its right password, a new secret for it. Raises
    ``InvalidAccountInput``, ``AccountAlreadyExists`` or ``CredentialsRefused`` (too many
    sign-ups from the address)."""

    def create() -> accounts.CreatedAccount:
        try:
            return accounts.create_account(
                deps.db, deps.vault, deps.clock, email=email, password=password
            )
        except AccountAlreadyExists:
            # A password check like a sign-in's, so under its per-account limit too.
            restarted = deps.credentials.password_attempt(
                email,
                lambda: accounts.restart_enrolment(
                    deps.db, deps.vault, email=email, password=password
                ),
            )
            if restarted is None:
                raise
            return restarted

    created = deps.credentials.sign_up(address, create)
    return created, authenticator_uri(created.totp_secret, created.email)
