"""Master key loading: from the environment, or from a private file created once."""

from __future__ import annotations

import base64
import multiprocessing
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from paysign.config import Settings
from paysign.custody import (
    MASTER_KEY_FILENAME,
    EnvelopeVault,
    InvalidMasterKey,
    MasterKeyFileExposed,
    load_master_key,
    previous_master_keys,
    vault_from_settings,
)

KEY = bytes(range(32))
KEY_TEXT = base64.urlsafe_b64encode(KEY).decode()
OTHER_KEY = bytes(range(200, 232))
OTHER_KEY_TEXT = base64.urlsafe_b64encode(OTHER_KEY).decode()


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    # Explicit None values so a PAYSIGN_* variable in the test environment cannot leak in.
    values: dict[str, Any] = {"master_key": None, "previous_master_keys": None}
    return Settings(data_dir=data_dir, **(values | overrides))


def file_mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- from the environment -----------------------------------------------------------------


def test_env_key_is_decoded(tmp_path: Path) -> None:
    assert load_master_key(make_settings(tmp_path, master_key=KEY_TEXT)) == KEY


def test_env_key_may_omit_padding_and_carry_whitespace(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, master_key=f"  {KEY_TEXT.rstrip('=')}\n")
    assert load_master_key(settings) == KEY


def test_env_key_creates_no_file(tmp_path: Path) -> None:
    load_master_key(make_settings(tmp_path / "data", master_key=KEY_TEXT))
    assert not (tmp_path / "data").exists()


# Length 0 is an empty PAYSIGN_MASTER_KEY, which means unset (test_an_empty_env_key_...).
@pytest.mark.parametrize("length", [16, 31, 33, 64])
def test_env_key_of_the_wrong_length_is_refused_without_echoing_it(
    tmp_path: Path, length: int
) -> None:
    value = base64.urlsafe_b64encode(bytes(range(7, 7 + length))).decode()
    with pytest.raises(InvalidMasterKey) as caught:
        load_master_key(make_settings(tmp_path, master_key=value))
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert "PAYSIGN_MASTER_KEY" in message
    assert f"decodes to {length} bytes" in message
    assert "exactly 32 bytes" in message
    if value:
        assert value not in message
        assert value.rstrip("=")[:8] not in message


@pytest.mark.parametrize("value", ["not base64 at all!", "é" * 43, KEY_TEXT[:-2] + "*="])
def test_env_key_that_is_not_base64_is_refused_without_echoing_it(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(InvalidMasterKey, match="not url-safe base64") as caught:
        load_master_key(make_settings(tmp_path, master_key=value))
    assert value not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# --- the key file -------------------------------------------------------------------------


def test_key_file_is_created_private_in_a_new_private_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "nested" / "data"
    key = load_master_key(make_settings(data_dir))
    key_file = data_dir / MASTER_KEY_FILENAME

    assert len(key) == 32
    assert file_mode(key_file) == 0o600
    assert file_mode(data_dir) == 0o700
    assert base64.urlsafe_b64decode(key_file.read_bytes().strip()) == key
    assert os.listdir(data_dir) == [MASTER_KEY_FILENAME]  # no temporary file left behind


def test_key_file_is_reused_on_the_next_load(tmp_path: Path) -> None:
    first = load_master_key(make_settings(tmp_path))
    second = load_master_key(make_settings(tmp_path))
    assert first == second


def test_existing_key_file_is_read(tmp_path: Path) -> None:
    key_file = tmp_path / MASTER_KEY_FILENAME
    key_file.write_text(KEY_TEXT + "\n")
    key_file.chmod(0o600)
    assert load_master_key(make_settings(tmp_path)) == KEY


def test_existing_data_dir_mode_is_left_alone(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    load_master_key(make_settings(tmp_path))
    assert file_mode(tmp_path) == 0o755


def test_env_key_wins_over_the_key_file(tmp_path: Path) -> None:
    load_master_key(make_settings(tmp_path))
    assert load_master_key(make_settings(tmp_path, master_key=KEY_TEXT)) == KEY


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660, 0o666])
def test_key_file_open_to_others_is_refused(tmp_path: Path, mode: int) -> None:
    key_file = tmp_path / MASTER_KEY_FILENAME
    key_file.write_text(KEY_TEXT)
    key_file.chmod(mode)
    with pytest.raises(MasterKeyFileExposed) as caught:
        load_master_key(make_settings(tmp_path))
    message = str(caught.value)
    assert f"chmod 600 {key_file}" in message
    assert f"{mode:04o}" in message
    assert KEY_TEXT not in message
    assert isinstance(caught.value, InvalidMasterKey)

    key_file.chmod(0o600)
    assert load_master_key(make_settings(tmp_path)) == KEY


def test_another_users_private_key_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 0600 key file planted by another user is not trusted: they know the key. Seen from a
    service running as a uid other than the file's (works without root)."""
    key_file = tmp_path / MASTER_KEY_FILENAME
    key_file.write_text(KEY_TEXT)
    key_file.chmod(0o600)
    service_uid = key_file.stat().st_uid + 1
    monkeypatch.setattr(os, "geteuid", lambda: service_uid)
    with pytest.raises(MasterKeyFileExposed) as caught:
        load_master_key(make_settings(tmp_path))
    message = str(caught.value)
    assert f"uid {service_uid}" in message and f"chown {service_uid} {key_file}" in message
    assert KEY_TEXT not in message


def test_key_file_with_junk_is_refused_without_echoing_it(tmp_path: Path) -> None:
    key_file = tmp_path / MASTER_KEY_FILENAME
    junk = "c2hvcnQga2V5IHRleHQ="  # base64, but of 14 bytes
    key_file.write_text(junk)
    key_file.chmod(0o600)
    with pytest.raises(InvalidMasterKey, match="decodes to 14 bytes") as caught:
        load_master_key(make_settings(tmp_path))
    assert str(key_file) in str(caught.value)
    assert junk not in str(caught.value)


def test_oversized_key_file_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / MASTER_KEY_FILENAME
    key_file.write_bytes(b"A" * 5000)
    key_file.chmod(0o600)
    with pytest.raises(InvalidMasterKey, match="too large"):
        load_master_key(make_settings(tmp_path))


def _load_after_barrier(data_dir: str, barrier: Any, results: Any) -> None:
    barrier.wait()
    results.put(load_master_key(make_settings(Path(data_dir))).hex())


@pytest.mark.parametrize("round_number", range(3))
def test_processes_starting_together_agree_on_one_key(tmp_path: Path, round_number: int) -> None:
    processes_count = 8
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes_count)
    results = context.Queue()
    data_dir = tmp_path / f"round-{round_number}"
    processes = [
        context.Process(target=_load_after_barrier, args=(str(data_dir), barrier, results))
        for _ in range(processes_count)
    ]
    for process in processes:
        process.start()
    keys = [results.get(timeout=30) for _ in processes]
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0

    assert len(set(keys)) == 1
    assert load_master_key(make_settings(data_dir)).hex() == keys[0]
    assert os.listdir(data_dir) == [MASTER_KEY_FILENAME]
    assert file_mode(data_dir / MASTER_KEY_FILENAME) == 0o600


# --- previous keys and rotation -----------------------------------------------------------


def test_no_previous_keys_by_default(tmp_path: Path) -> None:
    assert previous_master_keys(make_settings(tmp_path)) == []
    assert previous_master_keys(make_settings(tmp_path, previous_master_keys="")) == []


def test_previous_keys_are_comma_separated(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path, previous_master_keys=f" {KEY_TEXT} ,, {OTHER_KEY_TEXT.rstrip('=')},"
    )
    assert previous_master_keys(settings) == [KEY, OTHER_KEY]


def test_a_bad_previous_key_is_named_by_position_not_value(tmp_path: Path) -> None:
    bad = base64.urlsafe_b64encode(b"too short").decode()
    settings = make_settings(tmp_path, previous_master_keys=f"{KEY_TEXT},{bad}")
    with pytest.raises(InvalidMasterKey, match="PAYSIGN_PREVIOUS_MASTER_KEYS entry 2") as caught:
        previous_master_keys(settings)
    assert bad not in str(caught.value)
    assert KEY_TEXT not in str(caught.value)


def test_previous_keys_are_hidden_from_settings_repr(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, master_key=KEY_TEXT, previous_master_keys=OTHER_KEY_TEXT)
    assert KEY_TEXT not in repr(settings)
    assert OTHER_KEY_TEXT not in repr(settings)


def test_previous_keys_are_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYSIGN_PREVIOUS_MASTER_KEYS", f"{KEY_TEXT},{OTHER_KEY_TEXT}")
    monkeypatch.delenv("PAYSIGN_MASTER_KEY", raising=False)
    assert previous_master_keys(Settings(data_dir=tmp_path)) == [KEY, OTHER_KEY]


def test_rotating_from_the_key_file_to_a_new_env_key(tmp_path: Path) -> None:
    before = vault_from_settings(make_settings(tmp_path))
    sealed = before.seal("wallet:42", b"wallet private key")
    old_key_text = (tmp_path / MASTER_KEY_FILENAME).read_text().strip()

    during = vault_from_settings(
        make_settings(tmp_path, master_key=OTHER_KEY_TEXT, previous_master_keys=old_key_text)
    )
    assert during.open("wallet:42", sealed) == b"wallet private key"
    rotated = during.rewrap("wallet:42", sealed)

    after = vault_from_settings(make_settings(tmp_path, master_key=OTHER_KEY_TEXT))
    assert after.open("wallet:42", rotated) == b"wallet private key"
    assert isinstance(after, EnvelopeVault)


def test_an_empty_env_key_means_the_key_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`PAYSIGN_MASTER_KEY=` as the example environment file ships it: unset, like every other
    empty PAYSIGN_* value, not a key of 0 bytes."""
    monkeypatch.setenv("PAYSIGN_MASTER_KEY", "")
    monkeypatch.setenv("PAYSIGN_MASTER_KEY_PKCS11", " ")
    settings = Settings(data_dir=tmp_path)
    assert settings.master_key is None and settings.master_key_pkcs11 is None
    key = load_master_key(settings)
    assert (tmp_path / MASTER_KEY_FILENAME).exists() and len(key) == 32
