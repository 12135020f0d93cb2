"""The master key against the database, on both databases: the vault opens only when its keys
open every stored secret, and a rotation interrupted half-way is finished by running it again."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest

from conftest import FrozenClock
from paysign.config import Settings
from paysign.custody import (
    MASTER_KEY_FILENAME,
    EnvelopeVault,
    InvalidMasterKey,
    MasterKeyMissing,
    SealedSecret,
)
from paysign.services import accounts, notifications
from paysign.services.key_custody import census, open_vault, rotate_master_key
from paysign.services.oauth_refresh import new_successor_key, successor_pair
from paysign.services.oauth_values import digest
from paysign.store import oauth_repo, sealed_repo
from paysign.store.database import Database
from paysign.store.sealed_repo import TOTP_SECRETS, WALLET_KEYS, WEBHOOK_SECRETS

PASSWORD = "correct horse battery"


def text(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode()


def stored(db: Database) -> dict[str, bytes]:
    """Every stored secret, by its vault context, as sealed bytes."""
    found: dict[str, bytes] = {}
    with db.read() as conn:
        for column, context in (
            (WALLET_KEYS, accounts.wallet_context),
            (TOTP_SECRETS, accounts.totp_context),
        ):
            for row_id, blob in sealed_repo.page(conn, column, after_id="", limit=1000):
                found[context(row_id)] = blob
    return found


def opened(vault: EnvelopeVault, sealed: dict[str, bytes]) -> dict[str, bytes]:
    return {
        context: vault.open(context, SealedSecret.from_bytes(blob))
        for context, blob in sealed.items()
    }


class Interrupted(Exception):
    pass


def test_an_interrupted_rotation_is_finished_by_running_it_again(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    old_key, new_key = secrets.token_bytes(32), secrets.token_bytes(32)
    old = EnvelopeVault(old_key)
    for n in range(5):
        accounts.create_account(db, old, clock, email=f"h{n}@example.com", password=PASSWORD)
    plaintexts = opened(old, stored(db))

    rotating = EnvelopeVault(new_key, previous=[old_key])
    pages: list[str] = []

    def crash_after_two_pages(column: str, done: int) -> None:
        pages.append(column)
        if len(pages) == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        rotate_master_key(db, rotating, page_size=1, after_page=crash_after_two_pages)
    assert census(db) == {old.kek_id: 8, rotating.kek_id: 2}

    # Halfway, the new key alone fails closed and says what to do.
    new_only = Settings(data_dir=tmp_path / "var", database_url=db.url, master_key=text(new_key))
    with pytest.raises(InvalidMasterKey, match="rotate-master-key") as refused:
        open_vault(new_only, db)
    assert old.kek_id in str(refused.value) and text(old_key) not in str(refused.value)
    both = new_only.model_copy(update={"previous_master_keys": text(old_key)})
    assert open_vault(both, db).kek_id == rotating.kek_id

    report = rotate_master_key(db, rotating, page_size=2)
    # The interrupted run did two wallets (wallets go first); the rest are done now.
    assert report.rewrapped == {"wallet": 3, "totp": 5, "refresh": 0, "webhook": 0}
    assert report.already_current == {"wallet": 2, "totp": 0, "refresh": 0, "webhook": 0}
    assert census(db) == {rotating.kek_id: 10}
    alone = open_vault(new_only, db)
    assert opened(alone, stored(db)) == plaintexts

    again = rotate_master_key(db, rotating)
    assert again.rewrapped == {"wallet": 0, "totp": 0, "refresh": 0, "webhook": 0}


def test_a_secret_changed_meanwhile_is_never_overwritten(db: Database, clock: FrozenClock) -> None:
    vault = EnvelopeVault(secrets.token_bytes(32))
    created = accounts.create_account(db, vault, clock, email="h@example.com", password=PASSWORD)
    with db.read() as conn:
        before = sealed_repo.find_sealed(conn, TOTP_SECRETS, created.account_id)
    assert before is not None
    newer = vault.seal(accounts.totp_context(created.account_id), b"newer").to_bytes()
    with db.write() as conn:
        assert sealed_repo.replace_sealed(
            conn, TOTP_SECRETS, created.account_id, old=before, new=newer
        )
        stale = vault.seal(accounts.totp_context(created.account_id), b"stale").to_bytes()
        assert not sealed_repo.replace_sealed(
            conn, TOTP_SECRETS, created.account_id, old=before, new=stale
        )
        assert sealed_repo.find_sealed(conn, TOTP_SECRETS, created.account_id) == newer


def test_a_missing_key_file_is_not_replaced_over_stored_secrets(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "var", database_url=db.url)
    first = open_vault(settings, db)  # nothing stored yet: the key file is created
    key_file = settings.data_dir / MASTER_KEY_FILENAME
    assert key_file.exists()
    accounts.create_account(db, first, clock, email="h@example.com", password=PASSWORD)
    assert open_vault(settings, db).kek_id == first.kek_id

    key_file.unlink()
    with pytest.raises(MasterKeyMissing, match="Put that key back"):
        open_vault(settings, db)
    assert not key_file.exists()

    other = settings.model_copy(update={"master_key": text(secrets.token_bytes(32))})
    with pytest.raises(InvalidMasterKey, match=first.kek_id):
        open_vault(other, db)


def test_refresh_keys_and_webhook_secrets_are_rewrapped_and_stale_ones_left(
    db: Database, clock: FrozenClock
) -> None:
    old_key, new_key = secrets.token_bytes(32), secrets.token_bytes(32)
    old = EnvelopeVault(old_key)
    created = accounts.create_account(db, old, clock, email="h@example.com", password=PASSWORD)
    tokens = {name: secrets.token_urlsafe(32) for name in ("live", "stale")}
    sealers = {"live": old, "stale": EnvelopeVault(secrets.token_bytes(32))}  # a dropped key
    with db.write() as conn:
        for name, token in tokens.items():
            oauth_repo.insert_token(
                conn,
                digest(token),
                kind="refresh",
                family=name,
                client_id="client",
                account_id=created.account_id,
                scopes="s",
                resource="r",
                expires_at=clock.now() + 3600,
                successor_key=new_successor_key(sealers[name], digest(token)),
            )
    with db.read() as conn:
        before = oauth_repo.successor_key(conn, digest(tokens["live"]))
    pair = successor_pair(old, before, tokens["live"])
    assert pair is not None

    webhook = notifications.add_webhook(
        db, old, clock, created.account_id, "https://hooks.example/paysign"
    )

    rotating = EnvelopeVault(new_key, previous=[old_key])
    report = rotate_master_key(db, rotating)
    assert report.rewrapped == {"wallet": 1, "totp": 1, "refresh": 1, "webhook": 1}
    assert report.skipped == 1
    # The webhook's signing secret opens under the new key alone: deliveries stay signed.
    with db.read() as conn:
        (sealed_webhook,) = [
            blob
            for row_id, blob in sealed_repo.page(conn, WEBHOOK_SECRETS, after_id="", limit=10)
            if row_id == webhook.target.id
        ]
    reopened = EnvelopeVault(new_key).open(
        notifications.webhook_context(webhook.target.id), SealedSecret.from_bytes(sealed_webhook)
    )
    assert reopened.decode("ascii") == webhook.secret
    assert census(db) == {rotating.kek_id: 2}  # what the service needs: not the stale key
    with db.read() as conn:
        after = oauth_repo.successor_key(conn, digest(tokens["live"]))
    # The same successor pair, derived under the new key alone: a retried refresh still works.
    assert successor_pair(EnvelopeVault(new_key), after, tokens["live"]) == pair
