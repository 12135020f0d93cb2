"""Envelope encryption for secrets at rest (wallet private keys, TOTP seeds).

Each secret is encrypted under its own random 256-bit data key, and only that data key is
encrypted ("wrapped") under the key-encryption key (KEK), which never touches the database. Both
layers are AES-256-GCM with the caller's ``context`` as associated data, so a sealed secret copied
onto another row does not open:

    >>> old_kek, new_kek = bytes(range(32)), bytes(32)
    >>> vault = EnvelopeVault(old_kek)
    >>> sealed = vault.seal("wallet:42", b"private key")
    >>> vault.open("wallet:42", sealed)
    b'private key'
    >>> vault.open("wallet:43", sealed)
    Traceback (most recent call last):
    ...
    paysign.custody.vault.SecretUnreadable: cannot open the secret for 'wallet:43': data key failed authentication (sealed for another context, altered, or wrapped under a different key)

Rotating the KEK re-wraps the 32-byte data keys; the secrets' ciphertext stays as it is:

    >>> rotating = EnvelopeVault(new_kek, previous=[old_kek])
    >>> rotated = rotating.rewrap("wallet:42", sealed)
    >>> rotated.ciphertext == sealed.ciphertext
    True
    >>> EnvelopeVault(new_kek).open("wallet:42", rotated)
    b'private key'
"""  # noqa: E501

from __future__ import annotations

import hashlib
import os
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from paysign.errors import PaysignError

KEY_BYTES: Final = 32
NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
#: Order of the secp256k1 group: a private key is an integer k with 1 <= k < n.
SECP256K1_ORDER: Final = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

# One label per use keeps the uses apart: a fingerprint input is never a wrap's associated data,
# and a wrapped data key can never authenticate as a secret (or the other way round).
_KEK_ID_LABEL: Final = b"paysign/kek-id/v1\x00"
_WRAP_AAD_LABEL: Final = b"paysign/wrap/v1\x00"
_SECRET_AAD_LABEL: Final = b"paysign/secret/v1\x00"

_FORMAT_VERSION: Final = 1
# version, len(kek_id), len(wrapped_key). 16-bit lengths leave room for a KMS's key ids and blobs.
_HEADER: Final = struct.Struct(">BHH")
_MAX_FIELD: Final = 0xFFFF


class SecretUnreadable(PaysignError):
    """A sealed secret cannot be opened: wrong context, altered bytes or an unknown KEK.

    The message names the context and the reason only, never key material, plaintext or
    ciphertext, so it is safe to log.
    """

    slug = "secret-unreadable"
    title = "Stored secret cannot be opened"

    def __init__(self, reason: str, *, context: str | None = None) -> None:
        where = "" if context is None else f" for {context!r}"
        super().__init__(f"cannot open the secret{where}: {reason}")
        self.context = context
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SealedSecret:
    """A secret as stored: its ciphertext, its wrapped data key and the id of the wrapping KEK.

    ``to_bytes()`` gives one compact blob for one database column; ``from_bytes`` reads it back::

        version:u8 | len(kek_id):u16 | len(wrapped_key):u16 | kek_id (ASCII) | wrapped_key | ciphertext

    (lengths big-endian; version 1). ``ciphertext`` and ``wrapped_key`` are each
    ``nonce(12) || AES-GCM ciphertext || tag(16)``. The repr shows the ``kek_id`` only.

    >>> s = SealedSecret(ciphertext=b"c" * 40, wrapped_key=b"w" * 60, kek_id="0123456789abcdef")
    >>> SealedSecret.from_bytes(s.to_bytes()) == s
    True
    >>> s
    SealedSecret(kek_id='0123456789abcdef')
    """  # noqa: E501

    ciphertext: bytes = field(repr=False)
    wrapped_key: bytes = field(repr=False)
    kek_id: str

    def __post_init__(self) -> None:
        if not self.kek_id.isascii() or not self.kek_id.isprintable():
            raise ValueError("kek_id must be printable ASCII")
        if len(self.kek_id) > _MAX_FIELD or len(self.wrapped_key) > _MAX_FIELD:
            raise ValueError(f"kek_id and wrapped_key must each fit in {_MAX_FIELD} bytes")

    def to_bytes(self) -> bytes:
        kek_id = self.kek_id.encode("ascii")
        header = _HEADER.pack(_FORMAT_VERSION, len(kek_id), len(self.wrapped_key))
        return header + kek_id + self.wrapped_key + self.ciphertext

    @classmethod
    def from_bytes(cls, blob: bytes) -> SealedSecret:
        """Parse ``to_bytes()`` output; raises ``SecretUnreadable`` on anything else."""
        if len(blob) < _HEADER.size:
            raise SecretUnreadable("stored form is truncated")
        version, kek_id_length, wrapped_length = _HEADER.unpack_from(blob)
        if version != _FORMAT_VERSION:
            raise SecretUnreadable(f"stored form has unknown version {version}")
        kek_id_end = _HEADER.size + kek_id_length
        wrapped_end = kek_id_end + wrapped_length
        if len(blob) < wrapped_end:
            raise SecretUnreadable("stored form is truncated")
        try:
            return cls(
                ciphertext=bytes(blob[wrapped_end:]),
                wrapped_key=bytes(blob[kek_id_end:wrapped_end]),
                kek_id=bytes(blob[_HEADER.size : kek_id_end]).decode("ascii"),
            )
        except ValueError:  # UnicodeDecodeError included
            raise SecretUnreadable("stored key id is not printable ASCII") from None


class KekCipher(Protocol):
    """What wraps and unwraps data keys: ``AESGCM`` over a local key, or a key in an HSM."""

    def encrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes: ...

    def decrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes: ...


class ExternalKek(KekCipher, Protocol):
    """A key-encryption key held elsewhere (a PKCS#11 token), known by a public id."""

    @property
    def kek_id(self) -> str: ...


@runtime_checkable
class KeyVault(Protocol):
    """Seals and opens secrets; ``context`` (e.g. a wallet id, ``"totp:<account id>"``) is bound
    into the seal, so opening under any other context fails with ``SecretUnreadable``.

    ``EnvelopeVault`` is the local implementation; a cloud KMS or HSM can stand in later.
    """

    def seal(self, context: str, secret: bytes) -> SealedSecret: ...

    def open(self, context: str, sealed: SealedSecret) -> bytes: ...


class EnvelopeVault:
    """``KeyVault`` over a local 32-byte KEK, able to open secrets wrapped under ``previous`` KEKs.

    >>> vault = EnvelopeVault(bytes(32))
    >>> vault.open("totp:7", vault.seal("totp:7", b"seed"))
    b'seed'
    >>> vault.kek_id
    'e1e4596dc2c2c6a1'
    """

    def __init__(
        self, kek: bytes | ExternalKek, *, previous: Sequence[bytes | ExternalKek] = ()
    ) -> None:
        """``kek`` and each of ``previous``: 32 key bytes, or a key held in an HSM."""
        current = _cipher_of(kek, "key-encryption key")
        # Built once: every seal/open/rewrap would otherwise pay for AESGCM construction.
        self._kek_ciphers: dict[str, KekCipher] = dict(
            _cipher_of(old, f"previous key-encryption key #{index}")
            for index, old in enumerate(previous, start=1)
        )
        self._kek_id = current[0]
        self._kek_ciphers[self._kek_id] = current[1]

    @property
    def kek_id(self) -> str:
        """Fingerprint of the current KEK; a sealed secret with another ``kek_id`` needs rewrap."""
        return self._kek_id

    @property
    def held_kek_ids(self) -> frozenset[str]:
        """Fingerprints of every KEK this vault can open with: the current one and the previous.

        >>> sorted(EnvelopeVault(bytes(32), previous=[bytes(range(32))]).held_kek_ids)
        ['9b92b14d9e503f80', 'e1e4596dc2c2c6a1']
        """
        return frozenset(self._kek_ciphers)

    def seal(self, context: str, secret: bytes) -> SealedSecret:
        data_key = AESGCM.generate_key(bit_length=KEY_BYTES * 8)
        return SealedSecret(
            ciphertext=_encrypt(AESGCM(data_key), secret, _secret_aad(context)),
            wrapped_key=self._wrap(context, data_key),
            kek_id=self._kek_id,
        )

    def open(self, context: str, sealed: SealedSecret) -> bytes:
        data_key = self._unwrap(context, sealed)
        # The data-key cipher is deliberately not cached: that would keep every unwrapped data
        # key in memory for the life of the process, to save about a microsecond per open.
        return _decrypt(
            AESGCM(data_key), sealed.ciphertext, _secret_aad(context), context, "secret"
        )

    def rewrap(self, context: str, sealed: SealedSecret) -> SealedSecret:
        """Re-wrap the data key under the current KEK; ``ciphertext`` is carried over unchanged.

        The wrap is authenticated first (so a wrong context fails here too). A secret already
        under the current KEK comes back as it is, so a rotation job can skip unchanged rows.
        """
        data_key = self._unwrap(context, sealed)
        if sealed.kek_id == self._kek_id:
            return sealed
        return SealedSecret(
            ciphertext=sealed.ciphertext,
            wrapped_key=self._wrap(context, data_key),
            kek_id=self._kek_id,
        )

    def _wrap(self, context: str, data_key: bytes) -> bytes:
        cipher = self._kek_ciphers[self._kek_id]
        return _encrypt(cipher, data_key, _wrap_aad(self._kek_id, context))

    def _unwrap(self, context: str, sealed: SealedSecret) -> bytes:
        cipher = self._kek_ciphers.get(sealed.kek_id)
        if cipher is None:
            raise SecretUnreadable(
                f"wrapped under key-encryption key {sealed.kek_id[:64]!r}, which this vault does "
                "not hold (configure it as a previous master key)",
                context=context,
            )
        aad = _wrap_aad(sealed.kek_id, context)
        data_key = _decrypt(cipher, sealed.wrapped_key, aad, context, "data key")
        if len(data_key) != KEY_BYTES:  # Only reachable if a KEK holder wrapped something else.
            raise SecretUnreadable("wrapped data key has the wrong length", context=context)
        return data_key


def kek_fingerprint(kek: bytes) -> str:
    """Short public id of a KEK: 16 hex digits of a domain-separated SHA-256, never the key.

    >>> kek_fingerprint(bytes(32))
    'e1e4596dc2c2c6a1'
    """
    return hashlib.sha256(_KEK_ID_LABEL + kek).hexdigest()[:16]


def generate_wallet_key() -> bytes:
    """A fresh secp256k1 private key: 32 big-endian bytes of a uniform k with 1 <= k < n.

    >>> 1 <= int.from_bytes(generate_wallet_key(), "big") < SECP256K1_ORDER
    True
    """
    return (secrets.randbelow(SECP256K1_ORDER - 1) + 1).to_bytes(KEY_BYTES, "big")


def _cipher_of(kek: bytes | ExternalKek, what: str) -> tuple[str, KekCipher]:
    if isinstance(kek, bytes):
        _require_key_length(kek, what)
        return kek_fingerprint(kek), AESGCM(kek)
    return kek.kek_id, kek


def _require_key_length(key: bytes, what: str) -> None:
    if len(key) != KEY_BYTES:
        raise ValueError(f"{what} must be {KEY_BYTES} bytes, got {len(key)}")


def _secret_aad(context: str) -> bytes:
    return _SECRET_AAD_LABEL + context.encode()


def _wrap_aad(kek_id: str, context: str) -> bytes:
    # kek_id is fixed-width hex for local KEKs, but the NUL keeps any id unambiguous.
    return _WRAP_AAD_LABEL + kek_id.encode("ascii") + b"\x00" + context.encode()


def _encrypt(cipher: KekCipher, plaintext: bytes, aad: bytes) -> bytes:
    # Random 96-bit nonces: each data key encrypts once, and a KEK wraps far fewer than the
    # ~2**32 messages after which random GCM nonces become a concern.
    nonce = os.urandom(NONCE_BYTES)
    return nonce + cipher.encrypt(nonce, plaintext, aad)


def _decrypt(cipher: KekCipher, blob: bytes, aad: bytes, context: str, what: str) -> bytes:
    if len(blob) < NONCE_BYTES + TAG_BYTES:
        raise SecretUnreadable(f"{what} is truncated", context=context)
    try:
        return cipher.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except InvalidTag:
        # `from None`: nothing in the cause helps, and the message already says what failed.
        raise SecretUnreadable(
            f"{what} failed authentication (sealed for another context, altered, or wrapped "
            "under a different key)",
            context=context,
        ) from None
