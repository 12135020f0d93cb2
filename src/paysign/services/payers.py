"""Who pays for a signing request, found inside its transaction: by API key, or by account
(an OAuth access token checked elsewhere); and a key's holder checked on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from paysign.errors import NotAuthenticated
from paysign.policy.caps import Window
from paysign.services.keys import hash_api_key, looks_like_api_key
from paysign.services.signing_context import SigningDeps
from paysign.store import repositories as repo
from paysign.store.signing_batch import FirstRead, PayerWindows, ReadAhead
from paysign.store.signing_store import SigningTransaction


class HolderLoader(Protocol):
    """Finds who pays, inside the signing transaction: by API key, or by account (OAuth).
    Given what the request reads next, for a store to read it at the same time."""

    @property
    def lock_order(self) -> bytes:
        """Where the request goes in its batch (``GroupCommitter``'s ``lock_order``): the
        same payer sorts the same in every process."""
        ...

    def first_read(self, now: int, ahead: ReadAhead) -> FirstRead | None:
        """What ``__call__`` will ask of the transaction, for a store to read before the
        batch runs; ``None`` when it cannot be said in advance."""
        ...

    def payer_windows(self, now: int, windows: tuple[Window, Window]) -> PayerWindows:
        """The payer and the windows a live payment of theirs reserves in, for a store to lock
        before the batch runs."""
        ...

    def __call__(
        self, tx: SigningTransaction, now: int, ahead: ReadAhead
    ) -> repo.KeyHolder | None: ...


@dataclass(frozen=True, slots=True)
class _ByApiKey:
    key_hash: bytes

    @property
    def lock_order(self) -> bytes:
        return b"k" + self.key_hash

    def first_read(self, now: int, ahead: ReadAhead) -> FirstRead | None:
        return FirstRead(self.key_hash, now, ahead)

    def payer_windows(self, now: int, windows: tuple[Window, Window]) -> PayerWindows:
        return PayerWindows(self.key_hash, None, now, windows)

    def __call__(self, tx: SigningTransaction, now: int, ahead: ReadAhead) -> repo.KeyHolder | None:
        return tx.key_holder(self.key_hash, now, ahead)


@dataclass(frozen=True, slots=True)
class _ByAccount:
    account_id: str

    @property
    def lock_order(self) -> bytes:
        return b"a" + self.account_id.encode()

    def first_read(self, now: int, ahead: ReadAhead) -> FirstRead | None:
        return None

    def payer_windows(self, now: int, windows: tuple[Window, Window]) -> PayerWindows:
        return PayerWindows(None, self.account_id, now, windows)

    def __call__(self, tx: SigningTransaction, now: int, ahead: ReadAhead) -> repo.KeyHolder | None:
        return tx.account_holder(self.account_id)


def by_api_key(api_key: str) -> HolderLoader:
    return _ByApiKey(hash_api_key(api_key))


def by_account(account_id: str) -> HolderLoader:
    """For a credential already checked elsewhere (an OAuth access token)."""
    return _ByAccount(account_id)


def authenticate(deps: SigningDeps, api_key: str | None) -> repo.KeyHolder:
    """The key's holder; ``NotAuthenticated`` for a missing, malformed, unknown, expired or
    revoked key alike."""
    if api_key is None or not looks_like_api_key(api_key):
        raise NotAuthenticated("Unauthorized")
    with deps.store.transaction() as tx:
        holder = tx.key_holder(hash_api_key(api_key), deps.clock.now())
    if holder is None:
        raise NotAuthenticated("Unauthorized")
    return holder
