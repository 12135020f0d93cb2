"""EnvelopeVault: sealing, context binding, tamper detection, KEK rotation, safe errors."""

from __future__ import annotations

import base64
import dataclasses
import secrets
import traceback
from collections.abc import Callable

import coincurve
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given
from hypothesis import strategies as st

from paysign.custody import (
    SECP256K1_ORDER,
    EnvelopeVault,
    KeyVault,
    SealedSecret,
    SecretUnreadable,
    generate_wallet_key,
    kek_fingerprint,
)
from paysign.custody import vault as vault_module

OLD_KEK = bytes(range(32))
NEW_KEK = bytes(range(100, 132))
WALLET_KEY = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")


def flip_byte(data: bytes, index: int) -> bytes:
    mutable = bytearray(data)
    mutable[index] ^= 0x01
    return bytes(mutable)


def renderings(data: bytes) -> list[str]:
    """Every way a careless message might spell these bytes."""
    return [
        data.hex(),
        data.hex().upper(),
        base64.b64encode(data).decode().rstrip("="),
        base64.urlsafe_b64encode(data).decode().rstrip("="),
        repr(data)[2:-1],
    ]


# --- round trip ---------------------------------------------------------------------------


def test_open_returns_what_was_sealed() -> None:
    vault = EnvelopeVault(OLD_KEK)
    sealed = vault.seal("wallet:42", WALLET_KEY)
    assert vault.open("wallet:42", sealed) == WALLET_KEY
    assert sealed.kek_id == vault.kek_id == kek_fingerprint(OLD_KEK)


@given(context=st.text(max_size=80), secret=st.binary(max_size=256))
def test_round_trip_through_the_stored_form(context: str, secret: bytes) -> None:
    vault = EnvelopeVault(OLD_KEK)
    stored = vault.seal(context, secret).to_bytes()
    assert vault.open(context, SealedSecret.from_bytes(stored)) == secret


def test_each_seal_uses_a_fresh_data_key_and_nonces() -> None:
    vault = EnvelopeVault(OLD_KEK)
    first, second = vault.seal("wallet:42", WALLET_KEY), vault.seal("wallet:42", WALLET_KEY)
    assert first.ciphertext != second.ciphertext
    assert first.wrapped_key != second.wrapped_key


def test_layout_is_nonce_ciphertext_tag() -> None:
    sealed = EnvelopeVault(OLD_KEK).seal("wallet:42", WALLET_KEY)
    assert len(sealed.ciphertext) == 12 + len(WALLET_KEY) + 16
    assert len(sealed.wrapped_key) == 12 + 32 + 16


def test_envelope_vault_satisfies_the_key_vault_protocol() -> None:
    vault: KeyVault = EnvelopeVault(OLD_KEK)
    assert isinstance(vault, KeyVault)


def test_kek_id_is_a_short_fingerprint_not_the_key() -> None:
    kek_id = kek_fingerprint(OLD_KEK)
    assert len(kek_id) == 16
    int(kek_id, 16)
    assert kek_id not in OLD_KEK.hex()
    assert kek_fingerprint(NEW_KEK) != kek_id


def test_kek_ciphers_are_built_once_not_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    vault = EnvelopeVault(OLD_KEK, previous=[NEW_KEK])
    built_with: list[bytes] = []
    real_aesgcm = AESGCM

    class CountingAESGCM:
        generate_key = staticmethod(real_aesgcm.generate_key)

        def __new__(cls, key: bytes) -> AESGCM:  # type: ignore[misc]
            built_with.append(key)
            return real_aesgcm(key)

    monkeypatch.setattr(vault_module, "AESGCM", CountingAESGCM)
    for _ in range(5):
        vault.open("wallet:42", vault.seal("wallet:42", WALLET_KEY))
    assert len(built_with) == 10  # one data key per seal and per open
    assert OLD_KEK not in built_with
    assert NEW_KEK not in built_with


@pytest.mark.parametrize("bad_length", [0, 16, 31, 33, 64])
def test_a_kek_of_the_wrong_length_is_refused(bad_length: int) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        EnvelopeVault(b"\x07" * bad_length)
    with pytest.raises(ValueError, match="previous key-encryption key #2"):
        EnvelopeVault(OLD_KEK, previous=[NEW_KEK, b"\x07" * bad_length])


# --- context binding ----------------------------------------------------------------------


@pytest.mark.parametrize("other_context", ["wallet:43", "wallet:420", "totp:42", "", "Wallet:42"])
def test_a_secret_does_not_open_under_another_context(other_context: str) -> None:
    vault = EnvelopeVault(OLD_KEK)
    sealed = vault.seal("wallet:42", WALLET_KEY)
    with pytest.raises(SecretUnreadable) as caught:
        vault.open(other_context, sealed)
    assert caught.value.context == other_context


def test_halves_of_two_seals_do_not_combine() -> None:
    vault = EnvelopeVault(OLD_KEK)
    first, second = vault.seal("wallet:42", WALLET_KEY), vault.seal("wallet:42", b"other")
    spliced = dataclasses.replace(first, wrapped_key=second.wrapped_key)
    with pytest.raises(SecretUnreadable, match="secret failed authentication"):
        vault.open("wallet:42", spliced)


# --- tampering ----------------------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 11, 12, 20, -17, -1])  # nonce, body, tag
def test_a_tampered_ciphertext_does_not_open(index: int) -> None:
    vault = EnvelopeVault(OLD_KEK)
    sealed = vault.seal("wallet:42", WALLET_KEY)
    tampered = dataclasses.replace(sealed, ciphertext=flip_byte(sealed.ciphertext, index))
    with pytest.raises(SecretUnreadable, match="secret failed authentication"):
        vault.open("wallet:42", tampered)


@pytest.mark.parametrize("index", [0, 11, 12, 43, 44, -1])
def test_a_tampered_wrapped_key_does_not_open(index: int) -> None:
    vault = EnvelopeVault(OLD_KEK)
    sealed = vault.seal("wallet:42", WALLET_KEY)
    tampered = dataclasses.replace(sealed, wrapped_key=flip_byte(sealed.wrapped_key, index))
    with pytest.raises(SecretUnreadable, match="data key failed authentication"):
        vault.open("wallet:42", tampered)


@pytest.mark.parametrize("field_name", ["ciphertext", "wrapped_key"])
@pytest.mark.parametrize("length", [0, 5, 27])
def test_a_truncated_field_does_not_open(field_name: str, length: int) -> None:
    vault = EnvelopeVault(OLD_KEK)
    sealed = vault.seal("wallet:42", WALLET_KEY)
    value = getattr(sealed, field_name)[:length]
    with pytest.raises(SecretUnreadable, match="truncated"):
        vault.open("wallet:42", dataclasses.replace(sealed, **{field_name: value}))


def test_an_unknown_kek_id_does_not_open() -> None:
    vault = EnvelopeVault(OLD_KEK)
    sealed = vault.seal("wallet:42", WALLET_KEY)
    with pytest.raises(SecretUnreadable, match="does not hold"):
        vault.open("wallet:42", dataclasses.replace(sealed, kek_id="0" * 16))


def test_a_kek_id_pointing_at_another_held_kek_does_not_open() -> None:
    vault = EnvelopeVault(NEW_KEK, previous=[OLD_KEK])
    sealed = vault.seal("wallet:42", WALLET_KEY)
    moved = dataclasses.replace(sealed, kek_id=kek_fingerprint(OLD_KEK))
    with pytest.raises(SecretUnreadable, match="data key failed authentication"):
        vault.open("wallet:42", moved)


def test_a_vault_with_another_kek_cannot_open() -> None:
    sealed = EnvelopeVault(OLD_KEK).seal("wallet:42", WALLET_KEY)
    with pytest.raises(SecretUnreadable, match=kek_fingerprint(OLD_KEK)):
        EnvelopeVault(NEW_KEK).open("wallet:42", sealed)


# --- stored form --------------------------------------------------------------------------


def test_stored_form_is_versioned_and_compact() -> None:
    sealed = EnvelopeVault(OLD_KEK).seal("wallet:42", WALLET_KEY)
    stored = sealed.to_bytes()
    assert stored[0] == 1
    assert len(stored) == 5 + 16 + 60 + 60


@pytest.mark.parametrize(
    "stored",
    [
        b"",
        b"\x01\x00",
        b"\x02" + b"\x00" * 40,  # unknown version
        b"\x01\x00\x10\x00\x3c" + b"a" * 20,  # shorter than its lengths say
        b"\x01\x00\x02\x00\x00\xff\xfe",  # kek_id not ASCII
        b"\x01\x00\x02\x00\x00\x00\n",  # kek_id not printable
    ],
)
def test_malformed_stored_forms_are_unreadable(stored: bytes) -> None:
    with pytest.raises(SecretUnreadable):
        SealedSecret.from_bytes(stored)


def test_tampering_with_the_stored_kek_id_is_detected() -> None:
    vault = EnvelopeVault(NEW_KEK, previous=[OLD_KEK])
    stored = bytearray(vault.seal("wallet:42", WALLET_KEY).to_bytes())
    stored[5] ^= 0x01  # first character of the kek_id
    with pytest.raises(SecretUnreadable):
        vault.open("wallet:42", SealedSecret.from_bytes(bytes(stored)))


def test_repr_shows_neither_ciphertext_nor_wrapped_key() -> None:
    sealed = EnvelopeVault(OLD_KEK).seal("wallet:42", WALLET_KEY)
    text = repr(sealed)
    assert sealed.kek_id in text
    for secret_field in (sealed.ciphertext, sealed.wrapped_key):
        assert not any(rendering in text for rendering in renderings(secret_field))


# --- rotation -----------------------------------------------------------------------------


def test_rotation_opens_old_secrets_and_rewraps_only_the_data_key() -> None:
    sealed = EnvelopeVault(OLD_KEK).seal("wallet:42", WALLET_KEY)

    rotating = EnvelopeVault(NEW_KEK, previous=[OLD_KEK])
    assert rotating.open("wallet:42", sealed) == WALLET_KEY

    rotated = rotating.rewrap("wallet:42", sealed)
    assert rotated.ciphertext == sealed.ciphertext
    assert rotated.wrapped_key != sealed.wrapped_key
    assert rotated.kek_id == kek_fingerprint(NEW_KEK) != sealed.kek_id

    assert EnvelopeVault(NEW_KEK).open("wallet:42", rotated) == WALLET_KEY
    with pytest.raises(SecretUnreadable):
        EnvelopeVault(OLD_KEK).open("wallet:42", rotated)


def test_rewrap_of_a_current_secret_returns_it_unchanged() -> None:
    vault = EnvelopeVault(NEW_KEK, previous=[OLD_KEK])
    sealed = vault.seal("wallet:42", WALLET_KEY)
    assert vault.rewrap("wallet:42", sealed) is sealed


def test_rewrap_checks_the_context() -> None:
    sealed = EnvelopeVault(OLD_KEK).seal("wallet:42", WALLET_KEY)
    with pytest.raises(SecretUnreadable):
        EnvelopeVault(NEW_KEK, previous=[OLD_KEK]).rewrap("wallet:43", sealed)


def test_rewrapped_secret_stays_bound_to_its_context() -> None:
    sealed = EnvelopeVault(OLD_KEK).seal("wallet:42", WALLET_KEY)
    rotated = EnvelopeVault(NEW_KEK, previous=[OLD_KEK]).rewrap("wallet:42", sealed)
    with pytest.raises(SecretUnreadable):
        EnvelopeVault(NEW_KEK).open("wallet:43", rotated)


# --- error messages -----------------------------------------------------------------------


def test_error_messages_never_contain_key_material_plaintext_or_ciphertext() -> None:
    vault = EnvelopeVault(NEW_KEK, previous=[OLD_KEK])
    sealed = vault.seal("wallet:42", WALLET_KEY)
    failures: list[Callable[[], object]] = [
        lambda: vault.open("wallet:43", sealed),
        lambda: vault.open("wallet:42", dataclasses.replace(sealed, kek_id="f" * 16)),
        lambda: vault.open(
            "wallet:42", dataclasses.replace(sealed, ciphertext=flip_byte(sealed.ciphertext, 20))
        ),
        lambda: vault.open(
            "wallet:42", dataclasses.replace(sealed, wrapped_key=flip_byte(sealed.wrapped_key, 20))
        ),
        lambda: EnvelopeVault(OLD_KEK).open("wallet:42", sealed),
        lambda: vault.rewrap("wallet:43", sealed),
        lambda: SealedSecret.from_bytes(b"\x09" + sealed.to_bytes()[1:]),
    ]
    forbidden = [WALLET_KEY, OLD_KEK, NEW_KEK, sealed.ciphertext, sealed.wrapped_key]
    for failure in failures:
        with pytest.raises(SecretUnreadable) as caught:
            failure()
        error = caught.value
        # The traceback as a log would print it, with any chained causes.
        shown = "".join(traceback.format_exception(error)) + repr(error) + str(error.extensions)
        for data in forbidden:
            for rendering in renderings(data):
                assert rendering not in shown, (shown, rendering)


def test_secret_unreadable_is_a_domain_error_with_a_slug() -> None:
    error = SecretUnreadable("secret is truncated", context="wallet:42")
    assert error.slug == "secret-unreadable"
    assert str(error) == "cannot open the secret for 'wallet:42': secret is truncated"


# --- wallet keys --------------------------------------------------------------------------


def test_generated_wallet_keys_are_valid_and_distinct() -> None:
    keys = [generate_wallet_key() for _ in range(2000)]
    assert len(set(keys)) == len(keys)
    for key in keys:
        assert len(key) == 32
        assert 1 <= int.from_bytes(key, "big") < SECP256K1_ORDER
    for key in keys[:50]:
        assert coincurve.PrivateKey(key).secret == key


@pytest.mark.parametrize(
    ("drawn", "expected"), [(0, 1), (SECP256K1_ORDER - 2, SECP256K1_ORDER - 1)]
)
def test_generated_wallet_keys_reach_both_ends_of_the_range(
    monkeypatch: pytest.MonkeyPatch, drawn: int, expected: int
) -> None:
    def fixed_randbelow(bound: int) -> int:
        assert bound == SECP256K1_ORDER - 1
        return drawn

    monkeypatch.setattr(secrets, "randbelow", fixed_randbelow)
    key = generate_wallet_key()
    assert int.from_bytes(key, "big") == expected
    coincurve.PrivateKey(key)
