"""EIP-712 hashing and secp256k1 signing for USDC ``TransferWithAuthorization`` (EIP-3009).

Hand-rolled rather than via eth-account: the message type is fixed, so hashing it is a few
``keccak256`` calls over fixed-width words, about 40x faster than the generic encoder.
Tests prove the result byte-identical to ``eth_account.Account.sign_typed_data``.

    >>> key = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
    >>> checksum_address(address_of(key))
    '0x2c7536E3605D9C16a7a3D7b1898e529396a65c23'
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import coincurve
import sha3
from coincurve._libsecp256k1 import ffi as _ffi
from coincurve._libsecp256k1 import lib as _lib
from coincurve.context import GLOBAL_CONTEXT

# libsecp256k1's context, shared with coincurve: signing with it is RFC 6979, low-s.
_CTX = GLOBAL_CONTEXT.ctx

# keccak256(b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
EIP712_DOMAIN_TYPEHASH = bytes.fromhex(
    "8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f"
)
# keccak256(b"TransferWithAuthorization(address from,address to,uint256 value,
#   uint256 validAfter,uint256 validBefore,bytes32 nonce)") -- FiatToken's EIP3009.sol constant.
TRANSFER_WITH_AUTHORIZATION_TYPEHASH = bytes.fromhex(
    "7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267"
)
# Half the secp256k1 group order: USDC's ECRecover rejects any s above it.
SECP256K1_HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0

_EIP712_PREFIX = b"\x19\x01"
_ADDRESS_PAD = bytes(12)


def keccak256(data: bytes) -> bytes:
    """Ethereum's Keccak-256 (not NIST SHA3-256).

    ``safe-pysha3`` measured ~0.5 µs per 66-byte input against ~3.4 µs for pycryptodome.

    >>> keccak256(b"").hex()[:16]
    'c5d2460186f7233c'
    """
    digest: bytes = sha3.keccak_256(data).digest()
    return digest


def _uint256(value: int) -> bytes:
    # to_bytes raises OverflowError for negatives and values >= 2**256: the ABI has no such word.
    return value.to_bytes(32, "big")


def _address_word(address: bytes) -> bytes:
    if len(address) != 20:
        raise ValueError("an address is 20 bytes")
    return _ADDRESS_PAD + address


@lru_cache(maxsize=64)
def domain_separator(name: str, version: str, chain_id: int, verifying_contract: bytes) -> bytes:
    """The EIP-712 domain separator of a token; cached, as there is one per network.

    >>> usdc = bytes.fromhex("036CbD53842c5426634e7929541eC2318f3dCF7e")
    >>> domain_separator("USDC", "2", 84532, usdc).hex()[:16]
    '71f17a3b2ff373b8'
    """
    return keccak256(
        EIP712_DOMAIN_TYPEHASH
        + keccak256(name.encode("utf-8"))
        + keccak256(version.encode("utf-8"))
        + _uint256(chain_id)
        + _address_word(verifying_contract)
    )


def transfer_authorization_digest(
    domain_separator: bytes,
    from_: bytes,
    to: bytes,
    value: int,
    valid_after: int,
    valid_before: int,
    nonce: bytes,
) -> bytes:
    """The 32-byte EIP-712 digest of a ``TransferWithAuthorization`` message, ready to sign."""
    if len(nonce) != 32:
        raise ValueError("an EIP-3009 nonce is 32 bytes")
    struct_hash = keccak256(
        TRANSFER_WITH_AUTHORIZATION_TYPEHASH
        + _address_word(from_)
        + _address_word(to)
        + _uint256(value)
        + _uint256(valid_after)
        + _uint256(valid_before)
        + nonce
    )
    return keccak256(_EIP712_PREFIX + domain_separator + struct_hash)


def _address_of_public_key(public_key: coincurve.PublicKey) -> bytes:
    # Uncompressed SEC1 point without its 0x04 tag, hashed; the address is the last 20 bytes.
    return keccak256(public_key.format(compressed=False)[1:])[12:]


def address_of(private_key: bytes) -> bytes:
    """The 20-byte Ethereum address of a 32-byte secp256k1 private key."""
    return _address_of_public_key(coincurve.PublicKey.from_secret(private_key))


@lru_cache(maxsize=1024)
def checksum_address(address: bytes) -> str:
    """EIP-55 mixed-case hex; cached because a custodial wallet signs from few addresses.

    >>> checksum_address(bytes.fromhex("036cbd53842c5426634e7929541ec2318f3dcf7e"))
    '0x036CbD53842c5426634e7929541eC2318f3dCF7e'
    """
    lower = address.hex()
    nibbles = keccak256(lower.encode("ascii")).hex()
    return "0x" + "".join(
        char.upper() if nibble >= "8" else char
        for char, nibble in zip(lower, nibbles, strict=False)
    )


def wrong_checksum(text: str, address: bytes) -> bool:
    """Whether ``text``, ``0x`` and the 40 hex digits of ``address``, is in mixed case (an
    EIP-55 checksum) but not the right one: a mistyped address. All lower or all upper case
    carries no checksum to check.

    >>> address = bytes.fromhex("036cbd53842c5426634e7929541ec2318f3dcf7e")
    >>> wrong_checksum("0x036CbD53842c5426634e7929541eC2318f3dCF7e", address)
    False
    >>> wrong_checksum("0x036CbD53842c5426634e7929541eC2318f3dCF7E", address)
    True
    """
    digits = text[2:]
    mixed = digits != digits.lower() and digits != digits.upper()
    return mixed and checksum_address(address) != text


def _to_ethereum_signature(recoverable: bytes) -> bytes:
    # coincurve returns r || s || recid (0/1); USDC and the TS facilitator need v = 27/28.
    # libsecp256k1 signs with RFC 6979 nonces and always emits low-s, as USDC requires.
    return recoverable[:64] + bytes((27 + recoverable[64],))


def sign_digest(private_key: bytes, digest: bytes) -> bytes:
    """65 bytes r‖s‖v (v ∈ {27, 28}, low-s) over a 32-byte digest.

    Builds a key object per call; keep a :class:`PrivateKeySigner` to sign repeatedly.
    """
    return PrivateKeySigner(private_key).sign_digest(digest)


def sign_with_key(private_key: bytes, digest: bytes) -> bytes | None:
    """65 bytes r‖s‖v (v ∈ {27, 28}, low-s) over a 32-byte digest, straight from libsecp256k1;
    ``None`` when it refuses the key. ``WalletSigner`` signs with it, and so does the signer
    process (``custody.signer_worker``).

    >>> sign_with_key(bytes(32), bytes(32)) is None  # zero is no key
    True
    """
    # libsecp256k1 reads 32 bytes from each pointer, whatever Python's buffer holds.
    if len(private_key) != 32:
        raise ValueError("a secp256k1 private key is 32 bytes")
    if len(digest) != 32:
        raise ValueError("an EIP-712 digest is 32 bytes")
    signature = _ffi.new("secp256k1_ecdsa_recoverable_signature *")
    if not _lib.secp256k1_ecdsa_sign_recoverable(
        _CTX, signature, digest, private_key, _ffi.NULL, _ffi.NULL
    ):
        return None
    compact = _ffi.new("unsigned char[64]")
    recid = _ffi.new("int *")
    _lib.secp256k1_ecdsa_recoverable_signature_serialize_compact(_CTX, compact, recid, signature)
    return bytes(_ffi.buffer(compact, 64)) + bytes((27 + recid[0],))


class DigestSigner(Protocol):
    """Anything that signs a 32-byte digest for one address (a local key, an HSM, a KMS)."""

    @property
    def address(self) -> bytes: ...

    def sign_digest(self, digest: bytes) -> bytes: ...


class PrivateKeySigner:
    """A :class:`DigestSigner` over an in-memory private key; the coincurve key is built once.

    >>> signer = PrivateKeySigner(bytes(31) + b"\\x01")
    >>> len(signer.sign_digest(bytes(32)))
    65
    """

    __slots__ = ("_key", "address")

    def __init__(self, private_key: bytes) -> None:
        if len(private_key) != 32:
            raise ValueError("a secp256k1 private key is 32 bytes")
        self._key = coincurve.PrivateKey(private_key)  # ValueError for 0 or >= group order
        self.address: bytes = _address_of_public_key(self._key.public_key)

    def sign_digest(self, digest: bytes) -> bytes:
        if len(digest) != 32:
            raise ValueError("an EIP-712 digest is 32 bytes")
        return _to_ethereum_signature(self._key.sign_recoverable(digest, hasher=None))

    def __repr__(self) -> str:  # never show the key
        return f"PrivateKeySigner(address={checksum_address(self.address)})"


class WalletSigner:
    """A :class:`DigestSigner` for a custodial wallet whose address is already known.

    It calls libsecp256k1 with the key bytes directly: no key object and no public-key
    derivation, which would cost more than the signature itself on a one-shot signer.

    >>> key = bytes(31) + b"\\x01"
    >>> signer = WalletSigner(key, address_of(key))
    >>> signer.sign_digest(bytes(32)) == PrivateKeySigner(key).sign_digest(bytes(32))
    True
    """

    __slots__ = ("_key", "address")

    def __init__(self, private_key: bytes, address: bytes) -> None:
        if len(private_key) != 32 or not _lib.secp256k1_ec_seckey_verify(_CTX, private_key):
            raise ValueError("not a valid secp256k1 private key")
        self._key = private_key
        self.address: bytes = address

    def sign_digest(self, digest: bytes) -> bytes:
        signature = sign_with_key(self._key, digest)
        if signature is None:
            raise ValueError("libsecp256k1 refused to sign")
        return signature

    def __repr__(self) -> str:  # never show the key
        return f"WalletSigner(address={checksum_address(self.address)})"
