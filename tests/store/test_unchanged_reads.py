"""SQLite's signing batches answer a payer's first read from an earlier batch while the
database is unchanged (store/unchanged_reads.py), and never once anything else has committed."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from conftest import make_database_url, new_account, signature_body
from paysign.bootstrap import Runtime
from paysign.errors import NotAuthenticated, PaysignError
from paysign.services.keys import hash_api_key
from paysign.services.signing import SigningDeps, sign_payment
from paysign.store import unchanged_reads
from paysign.store.schema import api_keys
from paysign.store.signing_batch import ReadAhead
from paysign.store.signing_statements import SqlStatements
from paysign.store.signing_store import SigningStore, signing_store_for
from read_ahead_support import HOLDER_CHANGES, spent_today

HOSTS = ReadAhead(("api.example.com", "example.com"))


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """SQLite only: PostgreSQL's batches remember their payers in known_payers.py."""
    yield from make_database_url("sqlite", tmp_path)


@pytest.fixture(name="reads")
def holder_reads_sent(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, int]]:
    """Every holder read sent to SQLite from now on: (key hash, now)."""
    if not runtime.db.is_sqlite:
        pytest.skip("PostgreSQL's batches remember their payers in known_payers.py")
    sent: list[tuple[bytes, int]] = []
    send = SqlStatements._send_holder_with_grants
    holder = SqlStatements.key_holder

    def sending(self: Any, cur: Any, key_hash: bytes, now: int, hosts: Any) -> None:
        sent.append((key_hash, now))
        send(self, cur, key_hash, now, hosts)

    def reading(self: Any, key_hash: bytes, now: int) -> Any:
        sent.append((key_hash, now))
        return holder(self, key_hash, now)

    monkeypatch.setattr(SqlStatements, "_send_holder_with_grants", sending)
    monkeypatch.setattr(SqlStatements, "key_holder", reading)
    return sent


@pytest.fixture(name="deps")
def signing_deps(runtime: Runtime, signing_store: SigningStore) -> SigningDeps:
    return SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)


def pay(deps: SigningDeps, account: dict[str, str]) -> Any:
    body = signature_body(amount="10000")
    return sign_payment(deps, account["api_key"], body, sandbox=False)


def paid_twice(deps: SigningDeps, account: dict[str, str]) -> None:
    """Two payments: the first writes the key's first use, so the second reads the key again;
    after them, the key's read is kept."""
    pay(deps, account)
    pay(deps, account)


def first_read(store: SigningStore, account: dict[str, str], now: int, ahead: ReadAhead) -> Any:
    with store.transaction() as tx:
        return tx.key_holder(hash_api_key(account["api_key"]), now, ahead)


def test_a_payer_read_a_moment_ago_is_not_read_again(reads, runtime, signing_store, account):
    now = runtime.clock.now()
    first = first_read(signing_store, account, now, HOSTS)
    again = first_read(signing_store, account, now, HOSTS)
    without_hosts = first_read(signing_store, account, now, ReadAhead())
    first_read(signing_store, account, now, ReadAhead())
    assert again == first and without_hosts == first
    assert len(reads) == 2  # one with the hosts, one without


def test_a_read_holds_for_its_own_second_and_hosts_only(reads, runtime, signing_store, account):
    now = runtime.clock.now()
    first_read(signing_store, account, now, HOSTS)
    first_read(signing_store, account, now + 1, HOSTS)
    first_read(signing_store, account, now + 1, ReadAhead(("other.example",)))
    assert [at for _, at in reads] == [now, now + 1, now + 1]


def test_an_unknown_key_is_remembered_as_unknown(reads, runtime, signing_store):
    stranger = {"api_key": "psk_" + "x" * 43}
    now = runtime.clock.now()
    assert first_read(signing_store, stranger, now, HOSTS) is None
    assert first_read(signing_store, stranger, now, HOSTS) is None
    assert len(reads) == 1


@pytest.mark.parametrize(("change", "refusal"), HOLDER_CHANGES)
def test_a_change_committed_by_anyone_else_is_read_at_once(
    reads,
    runtime: Runtime,
    deps: SigningDeps,
    account: dict[str, str],
    change: Callable[[Runtime, dict[str, str]], Any],
    refusal: type[PaysignError],
) -> None:
    # The clock stands still: without the database's word that it changed, the last payment
    # would be decided on the read of the one before.
    paid_twice(deps, account)
    change(runtime, account)
    with pytest.raises(refusal):
        pay(deps, account)
    assert spent_today(runtime, account) == 20_000
    assert len(reads) == 3


def test_another_processs_commit_is_a_change(reads, runtime, deps, account):
    other = signing_store_for(runtime.db)
    try:
        someone = new_account(runtime)
        paid_twice(deps, account)
        pay(SigningDeps(other, runtime.vault, runtime.clock, runtime.registry), someone)
        pay(deps, account)
    finally:
        other.close()
    mine = hash_api_key(account["api_key"])
    assert [key for key, _ in reads].count(mine) == 3


def test_a_key_revoked_by_a_plain_sqlite_connection_is_refused(reads, runtime, deps, account):
    paid_twice(deps, account)
    path = runtime.db.url.split("///", 1)[1]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE api_keys SET revoked_at = ?", (runtime.clock.now(),))
    with pytest.raises(NotAuthenticated):
        pay(deps, account)


def test_the_keys_last_use_written_by_a_batch_is_read_again(reads, runtime, deps, account):
    pay(deps, account)  # writes the key's first use: the next batch reads the key again
    pay(deps, account)  # reads it, used a moment ago: nothing written
    pay(deps, account)  # nothing read
    assert len(reads) == 2
    with runtime.db.read() as conn:
        used = conn.execute(sa.select(api_keys.c.last_used_at)).scalar_one()
    assert used == runtime.clock.now()


def test_a_failed_batch_keeps_nothing_it_read(reads, runtime, signing_store, account):
    now = runtime.clock.now()
    with pytest.raises(RuntimeError), signing_store.transaction() as tx:
        tx.key_holder(hash_api_key(account["api_key"]), now, HOSTS)
        raise RuntimeError("a work failed")
    first_read(signing_store, account, now, HOSTS)
    assert len(reads) == 2


def test_past_its_bound_everything_is_dropped(reads, runtime, signing_store, monkeypatch):
    monkeypatch.setattr(unchanged_reads, "MAX_KEPT", 2)
    accounts = [new_account(runtime) for _ in range(4)]
    now = runtime.clock.now()
    for account in accounts:
        first_read(signing_store, account, now, HOSTS)
    first_read(signing_store, accounts[0], now, HOSTS)
    assert len(reads) == 5
