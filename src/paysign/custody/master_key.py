"""Where the key-encryption key (the master key) comes from.

``PAYSIGN_MASTER_KEY``, when set, is url-safe base64 of exactly 32 random bytes (padding
optional), e.g. from::

    python -c "import base64, secrets; print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"

When it is unset, ``<data_dir>/master.key`` holds the key in the same text form. The first start
creates it (mode 0600; ``data_dir`` 0700 if new), and processes starting together agree on one
key. A file other users can read or write is refused.

Rotation: set ``PAYSIGN_MASTER_KEY`` to a new key and ``PAYSIGN_PREVIOUS_MASTER_KEYS`` to the old
one(s), comma-separated; restart the service; run ``paysign admin rotate-master-key`` (which
re-wraps every sealed secret with ``EnvelopeVault.rewrap``); then drop the old keys and restart
(docs/deploy.md, "Master-key rotation").

    >>> from paysign.config import Settings
    >>> key = load_master_key(Settings(master_key="A" * 43))
    >>> len(key), key == bytes(32)
    (32, True)
"""  # noqa: E501

from __future__ import annotations

import base64
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Final

from paysign.config import Settings
from paysign.custody.vault import KEY_BYTES, EnvelopeVault, ExternalKek
from paysign.datadir import fsync_directory

MASTER_KEY_FILENAME: Final = "master.key"

_GENERATE_HINT: Final = (
    'generate one with: python -c "import base64, secrets; '
    'print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"'
)
# A key file is one line of base64; anything much longer is not a key file.
_MAX_FILE_BYTES: Final = 1024


class InvalidMasterKey(ValueError):
    """The configured master key cannot be used; the message names its source, never its value."""


class MasterKeyFileExposed(InvalidMasterKey):
    """The master key file can be read or written by users other than its owner."""


class MasterKeyMissing(InvalidMasterKey):
    """No master key is configured and none may be created: secrets sealed under one exist."""


def load_master_key(settings: Settings, *, create: bool = True) -> bytes:
    """The 32-byte KEK: from ``settings.master_key``, else from the key file, which is created
    with a new key when it is missing and ``create`` allows (never over existing secrets: a
    new key would open none of them)."""
    if settings.master_key is not None:
        return _decode_key(settings.master_key, source="PAYSIGN_MASTER_KEY")
    path = settings.data_dir / MASTER_KEY_FILENAME
    try:
        return _read_key_file(path)
    except FileNotFoundError:
        if not create:
            raise MasterKeyMissing(
                f"PAYSIGN_MASTER_KEY is unset and {path} does not exist, but the database holds "
                "secrets sealed under a master key. Put that key back (restore master.key from "
                "where you keep it apart from the backups, mode 0600, or set "
                "PAYSIGN_MASTER_KEY); a new key would open none of the wallets."
            ) from None
        _create_key_file(path)
    return _read_key_file(path)


def previous_master_keys(settings: Settings) -> list[bytes]:
    """KEKs from ``PAYSIGN_PREVIOUS_MASTER_KEYS`` (comma-separated; blank entries ignored).

    >>> from paysign.config import Settings
    >>> keys = previous_master_keys(Settings(previous_master_keys="A" * 43 + ", ," + "_" * 43))
    >>> [key[:2].hex() for key in keys]
    ['0000', 'ffff']
    """
    entries = (settings.previous_master_keys or "").split(",")
    return [
        _decode_key(entry, source=f"PAYSIGN_PREVIOUS_MASTER_KEYS entry {position}")
        for position, entry in enumerate(entries, start=1)
        if entry.strip()
    ]


def vault_from_settings(settings: Settings, *, create: bool = True) -> EnvelopeVault:
    """The vault a running service uses: current master key plus any previous ones.
    ``create``: as for :func:`load_master_key`. With ``PAYSIGN_MASTER_KEY_PKCS11`` the current
    key is the token's, and no key file is read or made."""
    previous: list[bytes | ExternalKek] = list(previous_master_keys(settings))
    if settings.previous_master_key_pkcs11:
        previous.append(_token_key(settings.previous_master_key_pkcs11, "PREVIOUS_MASTER_KEY"))
    if settings.master_key_pkcs11:
        if settings.master_key is not None:
            raise InvalidMasterKey(
                "both PAYSIGN_MASTER_KEY and PAYSIGN_MASTER_KEY_PKCS11 are set: keep the one "
                "that is current, and list a file key being rotated away from in "
                "PAYSIGN_PREVIOUS_MASTER_KEYS"
            )
        return EnvelopeVault(
            _token_key(settings.master_key_pkcs11, "MASTER_KEY"), previous=previous
        )
    return EnvelopeVault(load_master_key(settings, create=create), previous=previous)


def _token_key(text: str, name: str) -> ExternalKek:
    # Imported here: the PKCS#11 library is loaded only by a deployment that names a token.
    from paysign.custody.pkcs11_kek import Pkcs11Kek, Pkcs11KeySpec, Pkcs11KeyUnavailable

    source = f"PAYSIGN_{name}_PKCS11"
    try:
        return Pkcs11Kek(Pkcs11KeySpec.parse(text))
    except Pkcs11KeyUnavailable as exc:
        raise InvalidMasterKey(f"{source}: {exc}") from None


def _decode_key(text: str, *, source: str) -> bytes:
    text = text.strip()
    try:
        # Padding is optional (people strip it); validate=True rejects stray characters.
        key = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        # `from None`: the cause could quote the offending input.
        raise InvalidMasterKey(f"{source} is not url-safe base64; {_GENERATE_HINT}") from None
    if len(key) != KEY_BYTES:
        raise InvalidMasterKey(
            f"{source} decodes to {len(key)} bytes, but a master key is exactly {KEY_BYTES} "
            f"bytes; {_GENERATE_HINT}"
        )
    return key


def _read_key_file(path: Path) -> bytes:
    with path.open("rb") as file:
        # Checked on the open descriptor, so the file judged is the file read.
        st = os.fstat(file.fileno())
        uid = os.geteuid()
        if st.st_uid != uid:
            # Whatever its mode: its owner can read it, or planted it to know the key that
            # seals every new wallet.
            raise MasterKeyFileExposed(
                f"{path} belongs to uid {st.st_uid}, not to the service's user (uid {uid}): "
                "other users must not own the master key. If you made it, fix it with: "
                f"chown {uid} {path}; if you did not, do not use it (a key someone else "
                "chose opens every wallet sealed under it)"
            )
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise MasterKeyFileExposed(
                f"{path} is accessible to other users (mode {mode:04o}); the master key must be "
                f"private to the service's user. Fix it with: chmod 600 {path}"
            )
        content = file.read(_MAX_FILE_BYTES + 1)
    if len(content) > _MAX_FILE_BYTES:
        raise InvalidMasterKey(f"{path} is too large to be a master key file")
    return _decode_key(content.decode("ascii", errors="replace"), source=str(path))


def _create_key_file(path: Path) -> None:
    """Create ``path`` with a fresh key unless another process gets there first.

    The key is written in full to a private temporary file (mkstemp: O_CREAT|O_EXCL, mode 0600)
    and then hard-linked to ``path``. link() is atomic and fails when the name exists, so of
    several processes starting at once exactly one wins, and the others read the winner's
    complete file; creating ``path`` itself with O_EXCL would let them read it half-written.
    """
    directory = path.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key_text = base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)) + b"\n"
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(key_text)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return  # Another process won; its key is the key.
        # Losing this key after a crash would lose every wallet sealed under it: make the new
        # directory entry durable before anything gets sealed.
        fsync_directory(directory)
    finally:
        os.unlink(temporary)
