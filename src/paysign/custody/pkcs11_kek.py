"""A master key that lives in a PKCS#11 token (an HSM, or Debian's ``softhsm2`` to try it): the
data keys are wrapped and unwrapped by the token with AES-256-GCM, so the key-encryption key
is never in the process's memory or on disk.

The configuration is one line, ``PAYSIGN_MASTER_KEY_PKCS11``::

    module=/usr/lib/softhsm/libsofthsm2.so,token=paysign,key=paysign-kek,pin_file=/etc/paysign/hsm.pin

The PIN is read from a file private to the service's user (like ``master.key``), never from the
environment. The key is an AES-256 secret key with that label, usable to encrypt and decrypt.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pkcs11
from cryptography.exceptions import InvalidTag
from pkcs11 import KeyType, Mechanism, ObjectClass
from pkcs11.exceptions import PKCS11Error
from pkcs11.mechanisms import GCMParams

_FIELDS = ("module", "token", "key", "pin_file")
_FORM = "the form is module=PATH,token=LABEL,key=LABEL,pin_file=PATH"
_TAG_BITS = 128
_MAX_PIN_FILE_BYTES = 256


class Pkcs11KeyUnavailable(ValueError):
    """The token or its key cannot be used; the message never holds the PIN."""


@dataclass(frozen=True, slots=True)
class Pkcs11KeySpec:
    module: str
    token: str
    key: str
    pin_file: Path

    @classmethod
    def parse(cls, text: str) -> Pkcs11KeySpec:
        """``module=…,token=…,key=…,pin_file=…`` (any order).

        >>> Pkcs11KeySpec.parse("token=t, key=k,module=/m.so,pin_file=/p").key
        'k'
        """
        fields: dict[str, str] = {}
        for part in text.split(","):
            name, _, value = part.partition("=")
            if name.strip() not in _FIELDS or not value.strip():
                raise Pkcs11KeyUnavailable(_FORM)
            fields[name.strip()] = value.strip()
        missing = [name for name in _FIELDS if name not in fields]
        if missing:
            raise Pkcs11KeyUnavailable(f"{', '.join(missing)} missing; {_FORM}")
        return cls(fields["module"], fields["token"], fields["key"], Path(fields["pin_file"]))


class Pkcs11Kek:
    """A key-encryption key in a token, shaped like ``AESGCM`` (``encrypt``/``decrypt`` with a
    nonce and associated data), so ``EnvelopeVault`` uses it like a local key."""

    def __init__(self, spec: Pkcs11KeySpec) -> None:
        pin = _read_pin(spec.pin_file)
        try:
            session, self._lock, serial = _session(spec.module, spec.token, pin)
            with self._lock:
                self._key: Any = session.get_key(
                    label=spec.key, key_type=KeyType.AES, object_class=ObjectClass.SECRET_KEY
                )
        except (PKCS11Error, OSError, RuntimeError) as exc:
            raise Pkcs11KeyUnavailable(
                f"cannot use the PKCS#11 key {spec.key!r} of token {spec.token!r} through "
                f"{spec.module} ({type(exc).__name__}): check the module path, the token and "
                "key labels and the PIN file"
            ) from None
        # A public id for the key: its token's serial and its label, never key material.
        digest = hashlib.sha256(f"paysign/pkcs11\x00{serial}\x00{spec.key}".encode()).hexdigest()
        self.kek_id = "p11-" + digest[:12]

    def encrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes:
        with self._lock:
            return bytes(
                self._key.encrypt(
                    data,
                    mechanism=Mechanism.AES_GCM,
                    mechanism_param=GCMParams(nonce, associated_data, _TAG_BITS),
                )
            )

    def decrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes:
        try:
            with self._lock:
                return bytes(
                    self._key.decrypt(
                        data,
                        mechanism=Mechanism.AES_GCM,
                        mechanism_param=GCMParams(nonce, associated_data, _TAG_BITS),
                    )
                )
        except PKCS11Error:
            # Tokens report a failed tag as a general error: either way, it does not open.
            raise InvalidTag from None


@cache
def _library(module: str) -> Any:
    # A module is initialised once per process; every key of it shares the handle.
    return pkcs11.lib(module)


_sessions: dict[tuple[str, str], tuple[Any, threading.Lock, str]] = {}
_sessions_guard = threading.Lock()


def _session(module: str, token_label: str, pin: str) -> tuple[Any, threading.Lock, str]:
    """One logged-in session per token for the process, with the lock its users take: a
    token logs an application in once (a second login is refused), and a session is not for
    two threads at once."""
    with _sessions_guard:
        found = _sessions.get((module, token_label))
        if found is None:
            token = _library(module).get_token(token_label=token_label)
            session = token.open(user_pin=pin)
            serial = bytes(token.serial).decode("ascii", errors="replace").strip()
            found = _sessions[(module, token_label)] = (session, threading.Lock(), serial)
        return found


def _read_pin(path: Path) -> str:
    try:
        with path.open("rb") as file:
            mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
            if mode & 0o077:
                raise Pkcs11KeyUnavailable(
                    f"{path} is accessible to other users (mode {mode:04o}); the PIN must be "
                    f"private to the service's user. Fix it with: chmod 600 {path}"
                )
            content = file.read(_MAX_PIN_FILE_BYTES + 1)
    except FileNotFoundError:
        raise Pkcs11KeyUnavailable(f"the PIN file {path} does not exist") from None
    if len(content) > _MAX_PIN_FILE_BYTES:
        raise Pkcs11KeyUnavailable(f"{path} is too large to be a PIN file")
    return content.decode("utf-8", errors="replace").strip()
