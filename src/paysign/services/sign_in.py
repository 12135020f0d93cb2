"""The shared credential check: email + password + a one-time authenticator code.

Used by the OAuth sign-in pages and the web portal, so both get the same guarantees:

- a code (one TOTP step, ±1 step of clock drift) is accepted once per account;
- failures are counted per account (email) and per client address in a fixed window, and the
  check is refused once either limit is reached;
- an unknown email costs the same argon2 check as a wrong password (a decoy hash), and every
  failure gets the same message (no user enumeration);
- sign-ups are counted per client address, and asking for an email that already has an
  account counts as a failed sign-in of that address: probing for accounts through the sign-up
  form spends the same budget as probing through the sign-in form.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pyotp
from sqlalchemy.engine import Connection

from paysign.clock import Clock
from paysign.custody import KeyVault, SealedSecret
from paysign.errors import AccountAlreadyExists, InvalidAccountInput
from paysign.services.accounts import normalise_email, totp_context, verify_password
from paysign.services.client_network import client_network
from paysign.store import portal_repo, sign_in_repo
from paysign.store import repositories as repo
from paysign.store.database import Database

TOTP_STEP = 30
Created = TypeVar("Created")
Found = TypeVar("Found")
SIGN_IN_FAILED = (
    "The email, password or authenticator code is not correct. "
    "Each authenticator code works once: if you just used it, wait for the next one."
)
RATE_LIMITED = (
    "Too many failed sign-ins. Wait {minutes} minutes, then try again. "
    "Nothing about your account was changed."
)
CODE_ALREADY_USED = (
    "This authenticator code was already used to sign in. Each code works once: wait for the "
    "next code in your authenticator app (at most 30 seconds), then try again with it."
)
CODE_FAILED = (
    "The authenticator code is not correct. "
    "Each code works once: if you just used it, wait for the next one."
)
STEP_UP_FAILED = (
    "The current password or the authenticator code is not correct. "
    "Each code works once: if you just used it, wait for the next one."
)
SIGN_UP_LIMITED = (
    "Too many accounts were asked for from your network. Wait {minutes} minutes, then try again."
)
ACCOUNT_DISABLED = (
    "This account is disabled. Ask the service's operator to enable it; nothing in it was deleted."
)
CODE_RATE_LIMITED = (
    "Too many wrong authenticator codes. Wait {minutes} minutes, then try again. "
    "Nothing was changed."
)


class CredentialsRefused(Exception):
    """The check failed; ``message`` is safe to show (it never says which part was wrong)."""

    def __init__(self, message: str, *, rate_limited: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.rate_limited = rate_limited


@dataclass(frozen=True, slots=True)
class SignInLimits:
    max_failures_account: int
    max_failures_address: int
    failure_window: int
    max_sign_ups_address: int = 10


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _normalised(email: str) -> str:
    try:
        return normalise_email(email)
    except InvalidAccountInput:
        return ""


def _decoy_hash() -> str:
    from argon2 import PasswordHasher

    return PasswordHasher().hash(secrets.token_urlsafe(16))


def address_counter(address: str) -> str:
    """The failure counter of a client address: its network (``client_network``)."""
    return "address:" + client_network(address)


def email_key(email: str) -> str:
    try:
        normal = normalise_email(email)
    except InvalidAccountInput:
        normal = email.strip().lower()
    return "email:" + _digest(normal)[:40]


class CredentialCheck:
    def __init__(self, db: Database, vault: KeyVault, clock: Clock, limits: SignInLimits) -> None:
        self.db = db
        self.vault = vault
        self.clock = clock
        self.limits = limits
        # Verified against when the email is unknown, so both cases cost one argon2 check.
        self._decoy = repo.AccountRecord("", "", _decoy_hash(), b"", 0)

    def _minutes(self) -> int:
        return max(1, self.limits.failure_window // 60)

    def sign_in(
        self,
        email: str,
        password: str,
        code: str,
        address: str,
        on_success: Callable[[Connection, repo.AccountRecord], None] | None = None,
    ) -> repo.AccountRecord:
        """The account, if the password and a fresh code are right; ``on_success`` runs in the
        transaction that accepts the code. Raises :class:`CredentialsRefused` otherwise."""
        now = self.clock.now()
        window = self.limits.failure_window
        by_email = email_key(email)
        by_address = address_counter(address)
        # The attempt is counted before it is checked, as a failure until it succeeds: requests
        # racing each other each see their own count, so none is checked past a limit.
        with self.db.write() as conn:
            tried_email, _ = sign_in_repo.count_event(conn, by_email, now, window)
            tried_address, _ = sign_in_repo.count_event(conn, by_address, now, window)
            account = repo.find_account_by_email(conn, _normalised(email))
        if (
            tried_email > self.limits.max_failures_account
            or tried_address > self.limits.max_failures_address
        ):
            message = RATE_LIMITED.format(minutes=self._minutes())
            raise CredentialsRefused(message, rate_limited=True)
        password_ok = verify_password(account or self._decoy, password)
        step = self.totp_step(account, code) if account is not None and password_ok else None
        disabled = False
        with self.db.write() as conn:
            accepted = (
                account is not None
                and step is not None
                and sign_in_repo.accept_totp_step(conn, account.id, step)
            )
            if accepted:
                assert account is not None
                sign_in_repo.clear_failures(conn, by_email)
                sign_in_repo.uncount_event(conn, by_address)
                # Said only to whoever knows the password and a fresh code: no enumeration.
                disabled = _disabled(conn, account)
                if on_success is not None and not disabled:
                    on_success(conn, account)
        if not accepted:
            # A right code already spent is told apart only after the password was right: it
            # tells the user what to do, and an attacker nothing a wrong code would not.
            raise CredentialsRefused(CODE_ALREADY_USED if step is not None else SIGN_IN_FAILED)
        if disabled:
            raise CredentialsRefused(ACCOUNT_DISABLED)
        assert account is not None
        return account

    def sign_up(self, address: str, create: Callable[[], Created]) -> Created:
        """Run ``create`` (which makes the account) unless the address is over its sign-up or
        sign-in-failure budget. Raises :class:`CredentialsRefused` when it is, and lets
        ``AccountAlreadyExists`` through after counting it as a failure of the address."""
        now = self.clock.now()
        window = self.limits.failure_window
        by_address = address_counter(address)
        sign_ups = "sign-up:" + client_network(address)
        with self.db.read() as conn:
            over = (
                sign_in_repo.failures(conn, sign_ups, now, window)
                >= self.limits.max_sign_ups_address
                or sign_in_repo.failures(conn, by_address, now, window)
                >= self.limits.max_failures_address
            )
        if over:
            raise CredentialsRefused(
                SIGN_UP_LIMITED.format(minutes=self._minutes()), rate_limited=True
            )
        # Input the form rejects (a short password) is not counted; an account made or an
        # email found taken is. Requests racing past the check above overshoot the budget by
        # at most the number in flight.
        try:
            created = create()
        except AccountAlreadyExists:
            with self.db.write() as conn:
                sign_in_repo.record_failure(conn, sign_ups, now, window)
                sign_in_repo.record_failure(conn, by_address, now, window)
            raise
        with self.db.write() as conn:
            sign_in_repo.record_failure(conn, sign_ups, now, window)
        return created

    def password_attempt(self, email: str, attempt: Callable[[], Found | None]) -> Found | None:
        """``attempt()``, a check of ``email``'s password made elsewhere (re-enrolment at
        sign-up), under the same per-account limit as a sign-in: counted before it runs,
        refused while the account is over its limit, cleared when it finds something.
        Raises :class:`CredentialsRefused` when over the limit."""
        now = self.clock.now()
        key = email_key(email)
        with self.db.write() as conn:
            tried, _ = sign_in_repo.count_event(conn, key, now, self.limits.failure_window)
        if tried > self.limits.max_failures_account:
            raise CredentialsRefused(
                RATE_LIMITED.format(minutes=self._minutes()), rate_limited=True
            )
        found = attempt()
        if found is not None:
            with self.db.write() as conn:
                sign_in_repo.clear_failures(conn, key)
        return found

    def fresh_code(self, account_id: str, code: str, *, password: str | None = None) -> None:
        """Step-up: a fresh, unused authenticator code of a signed-in account (and its
        password, when given). Failures are counted per account. Raises
        :class:`CredentialsRefused`."""
        now = self.clock.now()
        window = self.limits.failure_window
        key = "step-up:" + account_id
        with self.db.write() as conn:  # counted before it is checked, as in ``sign_in``
            tried, _ = sign_in_repo.count_event(conn, key, now, window)
            account = portal_repo.find_account(conn, account_id)
        if tried > self.limits.max_failures_account:
            raise CredentialsRefused(
                CODE_RATE_LIMITED.format(minutes=self._minutes()), rate_limited=True
            )
        password_ok = account is not None and (
            password is None or verify_password(account, password)
        )
        step = self.totp_step(account, code) if account is not None and password_ok else None
        with self.db.write() as conn:
            accepted = step is not None and sign_in_repo.accept_totp_step(conn, account_id, step)
            if accepted:
                sign_in_repo.clear_failures(conn, key)
        if not accepted:
            raise CredentialsRefused(CODE_FAILED if password is None else STEP_UP_FAILED)

    def totp_step(self, account: repo.AccountRecord, code: str) -> int | None:
        """The TOTP step the code matches (the current one ±1), or ``None``."""
        secret = self.vault.open(
            totp_context(account.id), SealedSecret.from_bytes(account.sealed_totp_secret)
        ).decode()
        return matching_step(secret, code, self.clock.now())


def _disabled(conn: Connection, account: repo.AccountRecord) -> bool:
    """Read again in the accepting transaction: an operator may have just disabled it."""
    current = repo.find_account_by_email(conn, account.email)
    return current is None or current.disabled_at is not None


def matching_step(secret: str, code: str, now: int) -> int | None:
    """The TOTP step (the current one, or one step of drift either way) that ``code`` is for.

    >>> secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
    >>> code = pyotp.TOTP(secret).at(1_800_000_000)
    >>> matching_step(secret, code, 1_800_000_030) == 1_800_000_000 // 30
    True
    >>> matching_step(secret, "12 34", 1_800_000_000) is None
    True
    >>> matching_step(secret, "١٢٣٤٥٦", 1_800_000_000) is None  # digits, but not 0-9
    True
    """
    code = code.strip().replace(" ", "")
    # str.isdigit admits every script's digits, which no authenticator shows.
    if not (len(code) == 6 and code.isascii() and code.isdigit()):
        return None
    totp = pyotp.TOTP(secret, interval=TOTP_STEP)
    current = now // TOTP_STEP
    for step in (current, current - 1, current + 1):
        if hmac.compare_digest(totp.at(step * TOTP_STEP), code):
            return step
    return None
