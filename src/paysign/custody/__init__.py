"""Key custody: secrets sealed at rest under a master key that never touches the database.

    >>> from paysign.custody import EnvelopeVault, SealedSecret, generate_wallet_key
    >>> vault = EnvelopeVault(bytes(32))
    >>> wallet_key = generate_wallet_key()
    >>> column = vault.seal("wallet:42", wallet_key).to_bytes()
    >>> vault.open("wallet:42", SealedSecret.from_bytes(column)) == wallet_key
    True

At start-up: ``vault = vault_from_settings(settings)`` (see ``master_key`` for where keys live
and how to rotate them; ``pkcs11_kek`` for a master key kept in an HSM).
"""

from paysign.custody.master_key import (
    MASTER_KEY_FILENAME,
    InvalidMasterKey,
    MasterKeyFileExposed,
    MasterKeyMissing,
    load_master_key,
    previous_master_keys,
    vault_from_settings,
)
from paysign.custody.vault import (
    SECP256K1_ORDER,
    EnvelopeVault,
    KeyVault,
    SealedSecret,
    SecretUnreadable,
    generate_wallet_key,
    kek_fingerprint,
)

__all__ = [
    "MASTER_KEY_FILENAME",
    "SECP256K1_ORDER",
    "EnvelopeVault",
    "InvalidMasterKey",
    "KeyVault",
    "MasterKeyFileExposed",
    "MasterKeyMissing",
    "SealedSecret",
    "SecretUnreadable",
    "generate_wallet_key",
    "kek_fingerprint",
    "load_master_key",
    "previous_master_keys",
    "vault_from_settings",
]
