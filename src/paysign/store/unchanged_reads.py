"""A SQLite batch's first reads, answered from an earlier batch while the database is unchanged.

Every payer of a batch is read first: their key's holder and their rules on the seller's
hosts (``signing_sql.key_holder_with_grants_sql``), one join over four tables. With the load
spread over many accounts, a batch holds several payers, each read anew in every batch.

The read is a function of its parameters (the key's hash, the moment ``now`` in seconds, the
hosts) and of what the database holds, so the same read on an unchanged database gives the
same rows. SQLite says when it is unchanged: ``PRAGMA data_version`` changes on a connection
whenever another connection (of any process: the portal revoking a key, the CLI freezing an
account, another worker) has committed since it was last asked. Asked inside the signing
transaction, which holds the write lock, it covers everything up to the batch's own reads.

The signing connection's own commits leave it unchanged, and of what is read they write only
a key's last use (``touch_keys``): a read of a key whose last use the batch wrote is dropped
once the batch commits, and everything is dropped when a batch fails (its writes are undone,
and nothing it did is trusted).

    >>> reads = UnchangedReads()
    >>> reads.begin(data_version=1)
    >>> reads.found(b"key", 1_790_000_000, ()) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from paysign.policy.decide import Grant
from paysign.store.repositories import KeyHolder
from paysign.store.signing_batch import FirstReads, ReadAhead
from paysign.store.signing_statements import SqlStatements

#: Reads kept; past this, all are dropped (a read not found is made again).
MAX_KEPT = 20_000


@dataclass(frozen=True, slots=True)
class _Read:
    now: int
    holder: KeyHolder | None
    grants: tuple[Grant, ...]


class UnchangedReads:
    """The holder reads of the last batches, by (key hash, hosts), for one moment each."""

    def __init__(self) -> None:
        self._version: int | None = None
        self._reads: dict[tuple[bytes, tuple[str, ...]], _Read] = {}
        self._touched: set[str] = set()

    def begin(self, data_version: int) -> None:
        """A batch starts; ``data_version``: the database's, read inside its transaction."""
        if data_version != self._version or len(self._reads) > MAX_KEPT:
            self._reads.clear()
            self._version = data_version
        self._touched.clear()

    def found(self, key_hash: bytes, now: int, hosts: tuple[str, ...]) -> _Read | None:
        read = self._reads.get((key_hash, hosts))
        return read if read is not None and read.now == now else None

    def keep(
        self,
        key_hash: bytes,
        now: int,
        hosts: tuple[str, ...],
        holder: KeyHolder | None,
        grants: Sequence[Grant],
    ) -> None:
        self._reads[(key_hash, hosts)] = _Read(now, holder, tuple(grants))

    def touched(self, key_ids: Sequence[str]) -> None:
        self._touched.update(key_ids)

    def committed(self) -> None:
        """The batch committed: the reads of the keys whose last use it wrote are stale."""
        if not self._touched:
            return
        touched = self._touched
        for where, read in list(self._reads.items()):
            if read.holder is not None and read.holder.key_id in touched:
                del self._reads[where]
        touched.clear()

    def clear(self) -> None:
        """The batch failed: nothing read is kept."""
        self._reads.clear()
        self._touched.clear()
        self._version = None


class UnchangedReadStatements(SqlStatements):
    """``SqlStatements`` whose holder reads are answered by ``reads`` when it has them."""

    def __init__(self, cursor: object, reads: UnchangedReads) -> None:
        super().__init__(cursor, _same)
        self._reads = reads

    def key_holder(self, key_hash: bytes, now: int) -> KeyHolder | None:
        read = self._reads.found(key_hash, now, ())
        if read is not None:
            return read.holder
        holder = super().key_holder(key_hash, now)
        self._reads.keep(key_hash, now, (), holder, ())
        return holder

    def first_reads(self, key_hash: bytes, now: int, ahead: ReadAhead) -> FirstReads:
        hosts = tuple(ahead.hosts)
        read = self._reads.found(key_hash, now, hosts)
        if read is not None:
            return read.holder, list(read.grants), None
        holder, grants, spent = super().first_reads(key_hash, now, ahead)
        self._reads.keep(key_hash, now, hosts, holder, grants)
        return holder, grants, spent

    def touch_keys(self, last_used: Sequence[tuple[str, int]]) -> None:
        super().touch_keys(last_used)
        self._reads.touched([key_id for key_id, _ in last_used])


def _same(statement: str) -> str:
    return statement
