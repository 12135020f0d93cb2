from __future__ import annotations

import pyotp
import pytest

from paysign.bootstrap import Runtime
from paysign.custody import SealedSecret
from paysign.errors import AccountAlreadyExists, InvalidAccountInput
from paysign.protocol import address_of, checksum_address
from paysign.services import accounts
from paysign.store.schema import accounts as accounts_table
from paysign.store.schema import wallets


def create(runtime: Runtime, email: str = "Ada@Example.com", password: str = "long enough pass"):
    return accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email=email, password=password
    )


def test_creates_account_with_wallet_and_sealed_secrets(runtime: Runtime) -> None:
    created = create(runtime)
    assert created.email == "ada@example.com"
    assert pyotp.TOTP(created.totp_secret).now().isdigit()
    with runtime.db.read() as conn:
        wallet = conn.execute(wallets.select()).one()
        account = conn.execute(accounts_table.select()).one()
    # The private key is at rest only sealed, and opens to the key of the published address.
    key = runtime.vault.open(f"wallet:{wallet.id}", SealedSecret.from_bytes(wallet.sealed_key))
    assert checksum_address(address_of(key)) == created.wallet_address == wallet.address
    assert key not in wallet.sealed_key
    assert created.totp_secret.encode() not in account.sealed_totp_secret
    assert account.password_hash.startswith("$argon2")
    assert accounts.verify_password(
        accounts.require_account(runtime.db, created.email), "long enough pass"
    )
    assert not accounts.verify_password(
        accounts.require_account(runtime.db, created.email), "wrong"
    )


def test_email_is_unique_case_insensitively(runtime: Runtime) -> None:
    create(runtime, email="bob@example.com")
    with pytest.raises(AccountAlreadyExists):
        create(runtime, email="BOB@example.com ")
    with runtime.db.read() as conn:
        assert conn.execute(wallets.select()).all().__len__() == 1


@pytest.mark.parametrize(
    ("email", "password"),
    [
        ("not-an-email", "long enough pass"),
        ("a@b.c", "short"),
        ("a@example.com", "x" * 129),
        # Invisible characters: an escape sequence reached the operator's terminal; a
        # zero-width space or a bidi override made an account that looks like another.
        ("\x1b[8mhidden\x1b[0m@attacker.example", "long enough pass"),
        ("you\u200b@example.com", "long enough pass"),
        ("admin\u202e@example.com", "long enough pass"),
        ("you@exa\u00admple.com", "long enough pass"),
    ],
)
def test_refuses_bad_input_without_writing(runtime: Runtime, email: str, password: str) -> None:
    with pytest.raises(InvalidAccountInput):
        create(runtime, email=email, password=password)
    with runtime.db.read() as conn:
        assert conn.execute(accounts_table.select()).first() is None


def test_an_email_composed_or_decomposed_is_one_account(runtime: Runtime) -> None:
    """ "yöu" written with one character or with "o" and a combining mark was two accounts."""
    composed, decomposed = "y\u00f6u@example.com", "yo\u0308u@example.com"
    assert create(runtime, email=decomposed).email == composed
    with pytest.raises(AccountAlreadyExists):
        create(runtime, email=composed)
    assert accounts.require_account(runtime.db, decomposed).email == composed
