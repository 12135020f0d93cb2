"""Creating an account: its login secrets and its one custodial wallet, in one transaction."""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass

import pyotp
from argon2 import PasswordHasher

from paysign.clock import Clock
from paysign.custody import KeyVault, generate_wallet_key
from paysign.errors import AccountNotFound, InvalidAccountInput
from paysign.protocol.eip712 import address_of, checksum_address
from paysign.store import portal_repo, sign_in_repo
from paysign.store import repositories as repo
from paysign.store.database import Database

MIN_PASSWORD_LENGTH = 12  # ASVS 5.0 V6.2.1
MAX_PASSWORD_LENGTH = 128
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")

_password_hasher = PasswordHasher()


@dataclass(frozen=True, slots=True)
class CreatedAccount:
    account_id: str
    email: str
    wallet_address: str
    totp_secret: str  # base32; shown once, to enrol an authenticator app


def normalise_email(email: str) -> str:
    """The one spelling an account's email is stored and looked up in: trimmed, lower case,
    composed (NFC), so "ö" typed as one character or as "o" and a combining mark is one
    account."""
    email = unicodedata.normalize("NFC", email.strip().lower())
    if len(email) > 320 or not _EMAIL.match(email):
        raise InvalidAccountInput(f"{email!r} is not an email address")
    return email


def _require_visible(email: str) -> None:
    """A new account's email holds no invisible character: a control or format character
    (zero-width, bidi override, an escape sequence) makes two accounts look alike, and reaches
    the operator's terminal in ``paysign admin list-accounts``."""
    if not email.isprintable():
        raise InvalidAccountInput(
            f"{email!r} is not an email address: it holds an invisible or control character"
        )


def totp_context(account_id: str) -> str:
    return f"totp:{account_id}"


def wallet_context(wallet_id: str) -> str:
    return f"wallet:{wallet_id}"


def require_password_length(password: str) -> None:
    """Raises ``InvalidAccountInput`` unless the password's length is allowed."""
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise InvalidAccountInput(
            f"the password must be {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters long"
        )


def hash_password(password: str) -> str:
    """The stored form of a password: every account's password is hashed here, the same way."""
    return _password_hasher.hash(password)


def create_account(
    db: Database, vault: KeyVault, clock: Clock, *, email: str, password: str
) -> CreatedAccount:
    email = normalise_email(email)
    _require_visible(email)
    require_password_length(password)
    account_id = str(uuid.uuid4())
    wallet_id = str(uuid.uuid4())
    totp_secret = pyotp.random_base32()
    private_key = generate_wallet_key()
    address = checksum_address(address_of(private_key))
    now = clock.now()
    account = repo.AccountRecord(
        id=account_id,
        email=email,
        password_hash=hash_password(password),
        sealed_totp_secret=vault.seal(totp_context(account_id), totp_secret.encode()).to_bytes(),
        created_at=now,
    )
    sealed_key = vault.seal(wallet_context(wallet_id), private_key).to_bytes()
    with db.write() as conn:
        repo.insert_account(conn, account)
        repo.insert_wallet(
            conn,
            wallet_id=wallet_id,
            account_id=account_id,
            address=address,
            sealed_key=sealed_key,
            now=now,
        )
    return CreatedAccount(account_id, email, address, totp_secret)


def require_account(db: Database, email: str) -> repo.AccountRecord:
    with db.read() as conn:
        account = repo.find_account_by_email(conn, normalise_email(email))
    if account is None:
        raise AccountNotFound(f"no account for {email}")
    return account


def email_of(db: Database, account_id: str) -> str:
    """The signed-in account's email; raises ``AccountNotFound`` once the account is gone."""
    with db.read() as conn:
        account = portal_repo.find_account(conn, account_id)
    if account is None:
        raise AccountNotFound("the signed-in account no longer exists")
    return account.email


def verify_password(account: repo.AccountRecord, password: str) -> bool:
    try:
        return _password_hasher.verify(account.password_hash, password)
    except Exception:  # argon2 raises several mismatch/invalid-hash types; all mean "no".
        return False


def restart_enrolment(
    db: Database, vault: KeyVault, *, email: str, password: str
) -> CreatedAccount | None:
    """A new authenticator secret for an account whose first one was never confirmed (no code
    of it was ever accepted), given its password: someone who signed up and lost the secret
    before signing in can sign up again instead of losing the address. ``None`` when the
    account is unknown, already enrolled, or the password is wrong."""
    with db.read() as conn:
        account = repo.find_account_by_email(conn, normalise_email(email))
        if account is None or sign_in_repo.has_accepted_code(conn, account.id):
            return None
    if not verify_password(account, password):
        return None
    secret = pyotp.random_base32()
    sealed = vault.seal(totp_context(account.id), secret.encode()).to_bytes()
    with db.write() as conn:
        # Checked again in the writing transaction: a first sign-in may have just landed.
        if sign_in_repo.has_accepted_code(conn, account.id):
            return None
        portal_repo.set_sealed_totp_secret(conn, account.id, sealed)
        address = portal_repo.wallet_address(conn, account.id)
    assert address is not None
    return CreatedAccount(account.id, account.email, address, secret)
