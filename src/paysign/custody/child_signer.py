"""A custodial wallet's signer whose signatures the signer process may make ahead of time.

The signer process (``signer_process``) signs with the wallet's key bytes, so something must
hand them to it; ``protocol``'s signers never give a key out, so the key stays here, in
custody, and this signer is the only thing that writes it to the child's pipe. To the rest of
the service it is a plain ``DigestSigner``: ``sign_digest`` answers with the signature the child
made for that digest, or signs here when the child did not (it was not asked, died, stalled or
refused the key).

    >>> from paysign.protocol.eip712 import address_of
    >>> key = bytes(31) + b"\\x01"
    >>> signer = ChildSigner(key, address_of(key))
    >>> signer.made_ahead(bytes(32), b"from the child")
    >>> signer.has_signed(bytes(32)), signer.sign_digest(bytes(32))
    (True, b'from the child')
    >>> signer.sign_digest(bytes(32)) == WalletSigner(key, address_of(key)).sign_digest(bytes(32))
    True
"""

from __future__ import annotations

from paysign.metrics import signer_fell_back
from paysign.protocol.eip712 import WalletSigner, checksum_address


class ChildSigner:
    """``DigestSigner`` for one wallet, within one signing transaction: what the child signed
    for its payments waits here until they are answered, and goes with it."""

    __slots__ = ("_ahead", "_key", "_local", "_sent", "address")

    def __init__(self, private_key: bytes, address: bytes) -> None:
        self._local = WalletSigner(private_key, address)  # refuses a key libsecp256k1 would
        self._key = private_key
        self.address = address
        self._ahead: dict[bytes, bytes] = {}
        self._sent: set[bytes] | None = None  # the digests handed to the child, once any is

    def sign_digest(self, digest: bytes) -> bytes:
        signature = self._ahead.pop(digest, None)
        if signature is not None:
            return signature
        signer_fell_back(sent_to_child=self._sent is not None and digest in self._sent)
        return self._local.sign_digest(digest)

    def has_signed(self, digest: bytes) -> bool:
        """The child's signature over ``digest`` is here, waiting to be answered."""
        return digest in self._ahead

    def made_ahead(self, digest: bytes, signature: bytes) -> None:
        self._ahead[digest] = signature

    def job_for(self, digest: bytes) -> bytes:
        """The signer process's job for ``digest`` (``signer_worker``'s wire): for its pipe
        only, never a log, a file or an answer."""
        if self._sent is None:
            self._sent = set()
        self._sent.add(digest)
        return self._key + digest

    def __repr__(self) -> str:  # never show the key
        return f"ChildSigner(address={checksum_address(self.address)})"


__all__ = ["ChildSigner"]
