"""The master key in a PKCS#11 token (SoftHSM v2): secrets sealed and opened by the token, the
key never extractable, a wrong PIN or label refused at start, and the rotation command moving
between a file key and the token's key, on both databases."""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

import pkcs11
import pytest
from pkcs11 import Attribute, KeyType, ObjectClass

from conftest import FrozenClock, paysign
from paysign.config import Settings
from paysign.custody import EnvelopeVault, InvalidMasterKey, SecretUnreadable, vault_from_settings
from paysign.services import accounts
from paysign.services.key_custody import census, open_vault, rotate_master_key
from paysign.store.database import Database
from softhsm_support import MODULE, SoftHsm
from softhsm_support import softhsm as softhsm  # the fixture

PASSWORD = "correct horse battery"


def file_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def test_the_token_seals_and_opens_and_its_key_never_leaves_it(softhsm: SoftHsm) -> None:
    softhsm.new_key("kek-seal")
    softhsm.new_key("kek-other")
    vault = vault_from_settings(Settings(master_key_pkcs11=softhsm.spec("kek-seal")))
    assert vault.kek_id.startswith("p11-")
    sealed = vault.seal("wallet:1", b"a wallet key")
    assert vault.open("wallet:1", sealed) == b"a wallet key"
    with pytest.raises(SecretUnreadable):
        vault.open("wallet:2", sealed)
    other = vault_from_settings(Settings(master_key_pkcs11=softhsm.spec("kek-other")))
    assert other.kek_id != vault.kek_id
    with pytest.raises(SecretUnreadable):
        other.open("wallet:1", sealed)

    token = pkcs11.lib(MODULE).get_token(token_label=softhsm.token)
    # The vault above logged this process in; a new session shares that login.
    with token.open() as session:
        key = session.get_key(
            label="kek-seal", key_type=KeyType.AES, object_class=ObjectClass.SECRET_KEY
        )
        assert key[Attribute.SENSITIVE] and not key[Attribute.EXTRACTABLE]


def test_a_wrong_pin_label_or_loose_pin_file_fails_closed(softhsm: SoftHsm, tmp_path: Path) -> None:
    softhsm.new_key("kek-pin")
    wrong = tmp_path / "wrong.pin"
    wrong.write_text("not-the-pin\n")
    wrong.chmod(0o600)
    spec = softhsm.spec("kek-pin").replace(str(softhsm.pin_file), str(wrong))
    # A process of its own: a token logs a process in once, and this one already is.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env |= softhsm.env() | {
        "PAYSIGN_DATA_DIR": str(tmp_path / "var"),
        "PAYSIGN_MASTER_KEY_PKCS11": spec,
    }
    refused = paysign(env, "admin", "list-accounts")
    assert refused.returncode == 1 and "PAYSIGN_MASTER_KEY_PKCS11" in refused.stderr
    assert "not-the-pin" not in refused.stderr
    with pytest.raises(InvalidMasterKey, match="check the module path"):
        vault_from_settings(Settings(master_key_pkcs11=softhsm.spec("no-such-key")))
    wrong.chmod(0o644)
    with pytest.raises(InvalidMasterKey, match="chmod 600"):
        vault_from_settings(Settings(master_key_pkcs11=spec))
    with pytest.raises(InvalidMasterKey, match="module=PATH"):
        vault_from_settings(Settings(master_key_pkcs11="token=x"))
    both = Settings(master_key_pkcs11=softhsm.spec("kek-pin"), master_key=file_key())
    with pytest.raises(InvalidMasterKey, match="both"):
        vault_from_settings(both)


def test_rotation_from_a_file_key_to_the_token_and_back(
    db: Database, clock: FrozenClock, tmp_path: Path, softhsm: SoftHsm
) -> None:
    label = f"kek-{secrets.token_hex(3)}"
    softhsm.new_key(label)
    first = file_key()
    start = EnvelopeVault(base64.urlsafe_b64decode(first))
    for n in range(3):
        accounts.create_account(db, start, clock, email=f"h{n}@example.com", password=PASSWORD)
    plain = Settings(data_dir=tmp_path / "var", database_url=db.url)

    to_token = plain.model_copy(
        update={"master_key_pkcs11": softhsm.spec(label), "previous_master_keys": first}
    )
    report = rotate_master_key(db, open_vault(to_token, db))
    assert report.rewrapped == {"wallet": 3, "totp": 3, "refresh": 0, "webhook": 0}
    token_alone = plain.model_copy(update={"master_key_pkcs11": softhsm.spec(label)})
    token_vault = open_vault(token_alone, db)
    assert census(db) == {token_vault.kek_id: 6}
    with pytest.raises(InvalidMasterKey, match=token_vault.kek_id):
        open_vault(plain.model_copy(update={"master_key": first}), db)

    back = file_key()
    to_file = plain.model_copy(
        update={"master_key": back, "previous_master_key_pkcs11": softhsm.spec(label)}
    )
    back_report = rotate_master_key(db, open_vault(to_file, db))
    assert back_report.rewrapped == {"wallet": 3, "totp": 3, "refresh": 0, "webhook": 0}
    file_alone = open_vault(plain.model_copy(update={"master_key": back}), db)
    assert census(db) == {file_alone.kek_id: 6}
