"""The portal's use cases, for a signed-in account: each is a call into the existing services
(keys, policy, activity) or one short read. Synchronous; the pages run them in a worker thread.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyotp
from argon2 import PasswordHasher

from paysign.bootstrap import Runtime
from paysign.custody import SealedSecret, SecretUnreadable
from paysign.errors import (
    AccountAlreadyExists,
    AccountNotFound,
    InvalidAccountInput,
    InvalidKeyExpiry,
)
from paysign.policy.caps import day_window, month_window
from paysign.policy.document import parse_policy_document
from paysign.portal.sessions import Session, Sessions, digest
from paysign.services import accounts, activity, keys, policy
from paysign.services.accounts import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH
from paysign.services.sign_in import (
    TOTP_STEP,
    CredentialCheck,
    CredentialsRefused,
    SignInLimits,
    matching_step,
)
from paysign.store import activity_repo, oauth_repo, policy_repo, portal_repo
from paysign.store.activity_repo import ActivityFilters, ActivityRow
from paysign.store.portal_repo import KeyRow


def active_key(rows: list[KeyRow], now: int) -> KeyRow | None:
    return next((k for k in rows if k.revoked_at is None and k.expires_at > now), None)


AUTHENTICATOR_RESET_TTL = 600
RESET_EXPIRED = "This authenticator reset has expired. Start again; nothing was changed."


def _reset_context(session: Session) -> str:
    return f"totp-reset:{session.account_id}:{digest(session.id)}"


#: The dashboard's recent payments: the activity list's newest signatures.
RECENT_PAYMENTS = ActivityFilters(decision="signed")


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


@dataclass(frozen=True, slots=True)
class Overview:
    email: str
    wallet_address: str | None
    keys: list[KeyRow]
    pending: int  # how many sellers wait for approval
    #: (window name, spent, cap or None) for today and this month (UTC), in base units.
    spend: list[tuple[str, int, int | None]]
    #: The latest few signatures, newest first.
    recent: list[ActivityRow]


class PortalService:
    def __init__(self, runtime: Runtime) -> None:
        settings = runtime.settings
        self.db = runtime.db
        self.clock = runtime.clock
        self.vault = runtime.vault
        self.chain = runtime.sandbox_chain  # the dashboard's balance and test funds
        self.test_funds_amount = settings.test_funds_amount
        self.sessions = Sessions(
            runtime.db,
            runtime.clock,
            idle=settings.portal_session_idle_seconds,
            absolute=settings.portal_session_absolute_seconds,
        )
        self.credentials = CredentialCheck(
            runtime.db,
            runtime.vault,
            runtime.clock,
            SignInLimits(
                settings.oauth_max_failures_per_account,
                settings.oauth_max_failures_per_address,
                settings.oauth_failure_window_seconds,
                settings.portal_max_sign_ups_per_address,
            ),
        )

    def sign_in(
        self, session: Session | None, email: str, password: str, code: str, address: str
    ) -> Session:
        """A new signed-in session; raises ``CredentialsRefused``."""
        created: list[Session] = []

        def replace(conn: Any, account: Any) -> None:
            created.append(self.sessions.replace(conn, session, account.id))

        self.credentials.sign_in(email, password, code, address, on_success=replace)
        return created[0]

    def sign_up(
        self, email: str, password: str, address: str
    ) -> tuple[accounts.CreatedAccount, str]:
        """A new account and wallet, with the ``otpauth://`` URI of its authenticator secret;
        or, for an account never enrolled and its right password, a new secret for it. Raises
        ``InvalidAccountInput``, ``AccountAlreadyExists`` or ``CredentialsRefused`` (too many
        sign-ups from the address)."""

        def create() -> accounts.CreatedAccount:
            try:
                return accounts.create_account(
                    self.db, self.vault, self.clock, email=email, password=password
                )
            except AccountAlreadyExists:
                restarted = accounts.restart_enrolment(
                    self.db, self.vault, email=email, password=password
                )
                if restarted is None:
                    raise
                return restarted

        created = self.credentials.sign_up(address, create)
        uri = pyotp.TOTP(created.totp_secret, interval=TOTP_STEP).provisioning_uri(
            name=created.email, issuer_name="paysign"
        )
        return created, uri

    def email_of(self, account_id: str) -> str:
        with self.db.read() as conn:
            account = portal_repo.find_account(conn, account_id)
        if account is None:
            raise AccountNotFound("the signed-in account no longer exists")
        return account.email

    def overview(self, account_id: str) -> Overview:
        now = self.clock.now()
        with self.db.read() as conn:
            account = portal_repo.find_account(conn, account_id)
            if account is None:
                raise AccountNotFound("the signed-in account no longer exists")
            caps = policy_repo.load_settings(conn, account_id).caps
            spend = [
                (label, policy_repo.spent_in(conn, account_id, window), limit)
                for label, window, limit in (
                    ("Today (UTC)", day_window(now), caps.daily),
                    ("This month (UTC)", month_window(now), caps.monthly),
                )
            ]
            return Overview(
                account.email,
                portal_repo.wallet_address(conn, account_id),
                portal_repo.keys_of(conn, account_id),
                policy_repo.pending_count(conn, account_id),
                spend,
                activity_repo.page(conn, account_id, RECENT_PAYMENTS, limit=5),
            )

    def activity(self, account_id: str, limit: int = 100) -> list[dict[str, Any]]:
        return activity.activity(self.db, email=self.email_of(account_id), limit=limit)

    def create_key(self, account_id: str, code: str, days: int) -> keys.IssuedKey:
        """Step-up first (a fresh authenticator code), then the key. Raises
        ``CredentialsRefused``, ``InvalidKeyExpiry`` or ``ActiveKeyExists``."""
        email = self.email_of(account_id)
        if isinstance(days, bool) or not 1 <= days <= keys.MAX_EXPIRY_DAYS:
            # Checked before the code is spent.
            raise InvalidKeyExpiry(
                f"expiry must be 1 to {keys.MAX_EXPIRY_DAYS} days; {days} was asked"
            )
        self.credentials.fresh_code(account_id, code)
        return keys.issue_key(self.db, self.clock, email=email, expires_in_days=days)

    def change_password(self, session: Session, current: str, new: str, code: str) -> SignedOut:
        """Current password and a fresh code, then the new password; every other session of
        the account ends and every connected assistant (OAuth grant) is disconnected. Raises
        ``CredentialsRefused`` or ``InvalidAccountInput``."""
        account_id = session.account_id
        assert account_id is not None
        if not MIN_PASSWORD_LENGTH <= len(new) <= MAX_PASSWORD_LENGTH:
            raise InvalidAccountInput(
                f"the password must be {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} "
                "characters long"
            )
        self.credentials.fresh_code(account_id, code, password=current)
        with self.db.write() as conn:
            portal_repo.set_password_hash(conn, account_id, PasswordHasher().hash(new))
            return self._sign_out_everywhere_else(conn, session)

    # ---- resetting the authenticator: two steps ----

    def start_authenticator_reset(
        self, session: Session, password: str, code: str
    ) -> tuple[str, str, str]:
        """The password and a fresh code of the current authenticator; returns a new secret,
        its ``otpauth://`` URI and a token for :meth:`confirm_authenticator_reset`. Nothing is
        changed yet. Raises ``CredentialsRefused``."""
        account_id = session.account_id
        assert account_id is not None
        self.credentials.fresh_code(account_id, code, password=password)
        secret = pyotp.random_base32()
        expires = self.clock.now() + AUTHENTICATOR_RESET_TTL
        # Sealed for this session only: the confirmation cannot bring a secret of its own.
        sealed = self.vault.seal(_reset_context(session), f"{expires}:{secret}".encode())
        token = base64.urlsafe_b64encode(sealed.to_bytes()).decode()
        uri = pyotp.TOTP(secret, interval=TOTP_STEP).provisioning_uri(
            name=self.email_of(account_id), issuer_name="paysign"
        )
        return secret, uri, token

    def confirm_authenticator_reset(self, session: Session, token: str, code: str) -> SignedOut:
        """A code from the new authenticator: the new secret replaces the old one, every other
        session ends and every assistant is disconnected. Raises ``CredentialsRefused``."""
        account_id = session.account_id
        assert account_id is not None
        try:
            sealed = SealedSecret.from_bytes(base64.urlsafe_b64decode(token.encode()))
            expires, _, secret = (
                self.vault.open(_reset_context(session), sealed).decode().partition(":")
            )
        except (SecretUnreadable, ValueError):
            raise CredentialsRefused(RESET_EXPIRED) from None
        if int(expires) <= self.clock.now():
            raise CredentialsRefused(RESET_EXPIRED)
        step = matching_step(secret, code, self.clock.now())
        if step is None:
            raise CredentialsRefused(
                "That code is not from the new authenticator. Nothing was changed."
            )
        sealed_new = self.vault.seal(accounts.totp_context(account_id), secret.encode())
        with self.db.write() as conn:
            portal_repo.set_sealed_totp_secret(conn, account_id, sealed_new.to_bytes())
            oauth_repo.accept_totp_step(conn, account_id, step)  # this code is now used
            return self._sign_out_everywhere_else(conn, session)

    def _sign_out_everywhere_else(self, conn: Any, session: Session) -> SignedOut:
        # A changed credential may mean the old one leaked: whoever holds it, in another
        # browser or as an OAuth grant made with it, is out.
        assert session.account_id is not None
        return SignedOut(
            portal_repo.delete_account_sessions(conn, session.account_id, keep=digest(session.id)),
            oauth_repo.revoke_account_tokens(conn, session.account_id, self.clock.now()),
        )

    def end_other_sessions(self, session: Session) -> int:
        return self.sessions.end_others(session)

    def connected_assistants(self, account_id: str) -> int:
        with self.db.read() as conn:
            return oauth_repo.connected_assistants(conn, account_id, self.clock.now())

    def disconnect_assistants(self, account_id: str) -> int:
        """Revoke every OAuth grant of the account (tightening: no code needed)."""
        with self.db.write() as conn:
            return oauth_repo.revoke_account_tokens(conn, account_id, self.clock.now())

    def revoke_key(self, account_id: str) -> None:
        keys.revoke_key(self.db, self.clock, email=self.email_of(account_id))


# ---- the policy page ----

_APPROVAL_RANK = {"none": 0, "openEcosystem": 1, "all": 2}


def loosens(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether ``new`` lets the agent do anything ``old`` did not (so it needs a fresh code).

    >>> base = {"approval": "all", "ecosystems": {"premium": False}, "caps": {"daily": 5},
    ...         "allow": [], "deny": ["bad.example"]}
    >>> loosens(base, {**base, "caps": {"daily": 4}})
    False
    >>> loosens(base, {**base, "caps": {"daily": None}})
    True
    >>> loosens(base, {**base, "deny": []}), loosens(base, {**base, "allow": ["a.example"]})
    (True, True)
    >>> loosens(base, {**base, "approval": "none"})
    True
    >>> loosens(base, {**base, "deny": ["x.example", "bad.example"]})
    False
    """
    if _APPROVAL_RANK[new["approval"]] < _APPROVAL_RANK[old["approval"]]:
        return True
    if any(on and not old["ecosystems"].get(name) for name, on in new["ecosystems"].items()):
        return True
    for name, cap in old["caps"].items():
        raised = new["caps"].get(name)
        if cap is not None and (raised is None or raised > cap):
            return True
    if set(new["allow"]) - set(old["allow"]):
        return True
    return bool(set(old["deny"]) - set(new["deny"]))


class PolicyEdits:
    """Read the policy; change it, with a fresh authenticator code whenever it loosens."""

    def __init__(self, service: PortalService) -> None:
        self.service = service

    def get(self, account_id: str) -> dict[str, Any]:
        return policy.get_policy(self.service.db, email=self.service.email_of(account_id))

    def change(
        self,
        account_id: str,
        edit: Callable[[dict[str, Any]], dict[str, Any]],
        code: str,
    ) -> tuple[dict[str, Any], bool]:
        """Apply ``edit`` to the current document; returns the new policy and whether a code
        was needed. Raises ``InvalidPolicy`` (nothing changed, no code spent) or
        ``CredentialsRefused`` (a loosening without a fresh code)."""
        service = self.service
        email = service.email_of(account_id)
        old = policy.get_policy(service.db, email=email)
        old.pop("pending", None)
        new = edit(copy.deepcopy(old))
        parse_policy_document(new)  # validate before a code is spent
        needs_code = loosens(old, new)
        if needs_code:
            service.credentials.fresh_code(account_id, code)
        return policy.set_policy(service.db, service.clock, email=email, document=new), needs_code
