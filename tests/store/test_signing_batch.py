"""The batch transaction (store/signing_batch.py): reads once, reserves in memory after the first
payment of an account, writes once — and never lets a cap pass, in memory or in the database."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from conftest import signature_body
from paysign.errors import SpendCapExceeded
from paysign.policy.caps import Caps, Window, day_window, month_window
from paysign.policy.decide import Grant, PolicySettings
from paysign.policy.seller import SellerLocation
from paysign.protocol import PreparedPayment
from paysign.services import accounts, keys, policy
from paysign.services.signing import SigningDeps, by_api_key, signing_committer, signing_work
from paysign.store import policy_repo
from paysign.store.pending_queue import PendingEntry
from paysign.store.policy_repo import RefusalRecord
from paysign.store.repositories import KeyHolder, SignatureRecord
from paysign.store.signing_batch import BatchTransaction, ReservationLost, SpendTotal

NOW = 1_790_000_000
DAY, MONTH = day_window(NOW), month_window(NOW)
CAPS = Caps(per_payment=None, daily=100, monthly=1_000)


@dataclass
class FakeStatements:
    """The database as ``SigningStatements`` sees it: two window rows per account, guarded."""

    spent: dict[tuple[str, str], int] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    signatures: list[SignatureRecord] = field(default_factory=list)
    pending: dict[str, set[tuple[str, str]]] = field(default_factory=dict)

    def key_holder(self, key_hash: bytes, now: int) -> KeyHolder | None:
        self.calls.append("key_holder")
        return KeyHolder("k1", "a1", "w1", "0x" + "11" * 20, b"", None, PolicySettings.defaults())

    def account_holder(self, account_id: str) -> KeyHolder | None:
        self.calls.append("account_holder")
        return None

    def grants(self, account_id: str, hosts: Sequence[str]) -> list[Grant]:
        self.calls.append("grants")
        return []

    def _fits(self, total: SpendTotal) -> bool:
        return all(
            limit is None or self.spent.get((total.account_id, name), 0) + total.amount <= limit
            for name, limit in (("daily", total.caps.daily), ("monthly", total.caps.monthly))
        )

    def _add(self, account_id: str, amount: int) -> tuple[int, int]:
        for name in ("daily", "monthly"):
            self.spent[(account_id, name)] = self.spent.get((account_id, name), 0) + amount
        return self.spent[(account_id, "daily")], self.spent[(account_id, "monthly")]

    def reserve(self, total: SpendTotal) -> tuple[int, int] | None:
        self.calls.append("reserve")
        return self._add(total.account_id, total.amount) if self._fits(total) else None

    def lock_windows(self, account_id: str, day: Window, month: Window) -> tuple[int, int]:
        self.calls.append("lock_windows")
        return self._add(account_id, 0)

    def add_spends(self, totals: Sequence[SpendTotal]) -> bool:
        self.calls.append("add_spends")
        if not all(self._fits(total) for total in totals):
            return False
        for total in totals:
            self._add(total.account_id, total.amount)
        return True

    def insert_signatures(self, records: Sequence[SignatureRecord]) -> None:
        self.calls.append("insert_signatures")
        self.signatures.extend(records)

    def touch_keys(self, last_used: Sequence[tuple[str, int]]) -> None:
        self.calls.append("touch_keys")

    def lock_pending(self, account_id: str) -> None:
        self.calls.append("lock_pending")

    def pending_state(self, account_id: str, seller: SellerLocation) -> tuple[int, bool]:
        self.calls.append("pending_state")
        waiting = self.pending.setdefault(account_id, set())
        return len(waiting), (seller.host, seller.path) in waiting

    def record_pending(self, entries: Sequence[PendingEntry]) -> None:
        self.calls.append("record_pending")
        for e in entries:
            self.pending.setdefault(e.account_id, set()).add((e.seller.host, e.seller.path))

    def insert_refusals(self, refusals: Sequence[RefusalRecord]) -> None:
        self.calls.append("insert_refusals")


def test_reads_are_made_once_per_transaction() -> None:
    sql = FakeStatements()
    tx = BatchTransaction(sql)
    holders = {id(tx.key_holder(b"h", NOW)) for _ in range(10)}
    for _ in range(10):
        tx.grants("a1", ["api.example.com", "*.example.com"])
    assert len(holders) == 1
    assert sql.calls == ["key_holder", "grants"]
    tx.grants("a1", ["other.example.org"])  # other hosts: another read
    assert sql.calls[-1] == "grants"


def test_the_first_payment_is_reserved_at_once_and_the_rest_at_the_flush() -> None:
    sql = FakeStatements()
    tx = BatchTransaction(sql)
    outcomes = [tx.reserve("a1", 30, DAY, MONTH, CAPS) for _ in range(4)]
    assert outcomes[:3] == [None, None, None]
    assert outcomes[3] is not None
    assert (outcomes[3].window.name, outcomes[3].limit, outcomes[3].spent) == ("daily", 100, 90)
    assert sql.spent[("a1", "daily")] == 30  # only the first is in the database before the flush
    tx.flush()
    assert sql.spent == {("a1", "daily"): 90, ("a1", "monthly"): 90}
    assert sql.calls == ["reserve", "add_spends"]


def test_a_refused_first_payment_locks_the_windows_and_smaller_ones_still_fit() -> None:
    sql = FakeStatements(spent={("a1", "daily"): 70, ("a1", "monthly"): 70})
    tx = BatchTransaction(sql)
    hit = tx.reserve("a1", 40, DAY, MONTH, CAPS)
    assert hit is not None and (hit.window.name, hit.spent) == ("daily", 70)
    assert tx.reserve("a1", 20, DAY, MONTH, CAPS) is None
    assert tx.reserve("a1", 20, DAY, MONTH, CAPS) is not None
    assert tx.reserve("a1", 10, DAY, MONTH, CAPS) is None
    tx.flush()
    assert sql.spent[("a1", "daily")] == 100
    assert sql.calls == ["reserve", "lock_windows", "add_spends"]


def test_the_monthly_cap_refuses_when_the_day_has_room() -> None:
    sql = FakeStatements(spent={("a1", "daily"): 0, ("a1", "monthly"): 990})
    tx = BatchTransaction(sql)
    hit = tx.reserve("a1", 20, DAY, MONTH, CAPS)
    assert hit is not None and (hit.window.name, hit.limit, hit.spent) == ("monthly", 1_000, 990)


def test_accounts_are_reserved_apart() -> None:
    sql = FakeStatements(spent={("a2", "daily"): 50, ("a2", "monthly"): 50})
    tx = BatchTransaction(sql)
    outcomes = [tx.reserve(a, 40, DAY, MONTH, CAPS) for a in ("a1", "a2", "a1", "a2", "a1")]
    assert [o is None for o in outcomes] == [True, True, True, False, False]
    tx.flush()
    assert (sql.spent[("a1", "daily")], sql.spent[("a2", "daily")]) == (80, 90)


def test_a_total_the_database_refuses_fails_the_flush_before_any_record() -> None:
    sql = FakeStatements()
    tx = BatchTransaction(sql)
    assert tx.reserve("a1", 40, DAY, MONTH, CAPS) is None
    assert tx.reserve("a1", 40, DAY, MONTH, CAPS) is None
    sql.spent[("a1", "daily")] = 90  # written behind the batch's back: the guard must hold
    tx.insert_signature(
        SignatureRecord(
            "a1",
            "k1",
            "api.example.com",
            "/",
            "eip155:84532",
            "0x",
            "0x",
            40,
            b"n" * 32,
            NOW + 60,
            False,
            2,
            NOW,
        )
    )
    with pytest.raises(ReservationLost):
        tx.flush()
    assert sql.signatures == []


def _entry(account_id: str, host: str) -> PendingEntry:
    pay_to = "0x" + "22" * 20
    return PendingEntry(account_id, SellerLocation(host, "/q"), pay_to, 5, "eip155:1", NOW)


def test_the_queue_admits_new_sellers_only_while_it_has_room() -> None:
    waiting = {("old.example", "/q"), ("older.example", "/q")}
    sql = FakeStatements(pending={"a1": set(waiting)})
    tx = BatchTransaction(sql)
    cap = 4  # two waiting: room for two more
    answers = [
        tx.admit_pending(_entry("a1", host), cap)
        for host in ("n1.example", "n1.example", "n2.example", "n3.example", "old.example")
    ]
    # The second look at n1 is one the batch added: not counted twice. n3 finds no room, but
    # a seller already waiting is always refreshed.
    assert answers == [True, True, True, False, True]
    assert tx.admit_pending(_entry("a2", "n3.example"), cap)  # another account, its own queue
    tx.flush()
    assert sql.pending["a1"] == waiting | {("n1.example", "/q"), ("n2.example", "/q")}
    assert sql.pending["a2"] == {("n3.example", "/q")}
    # Each account locked once; each seller looked up once.
    assert sql.calls.count("lock_pending") == 2
    assert sql.calls.count("pending_state") == 5
    assert sql.calls[-1] == "record_pending"  # written once, at the flush


# --- on the real databases, through group commit --------------------------------------------


def new_account(runtime, caps: dict[str, int | None]) -> tuple[str, str]:
    """A fresh account allowed to pay api.example.com within ``caps``: its key and its id."""
    email = f"batch-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email=email, password="p" * 12
    )
    doc = policy.get_policy(runtime.db, email=email)
    doc["caps"] = caps
    doc["allow"] = ["api.example.com"]
    policy.set_policy(runtime.db, runtime.clock, email=email, document=doc)
    issued = keys.issue_key(runtime.db, runtime.clock, email=email, expires_in_days=30)
    return issued.api_key, created.account_id


def test_two_accounts_in_one_batch_each_keep_their_own_caps(runtime, signing_store) -> None:
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    caps = {"perPayment": None, "daily": 30_000, "monthly": None}
    (first, _), (second, _) = new_account(runtime, caps), new_account(runtime, caps)
    body = signature_body(amount="10000")
    works = [
        signing_work(deps, by_api_key(key), body, sandbox=False)
        for _ in range(6)
        for key in (first, second)
    ]
    committer = signing_committer(deps)

    async def all_at_once() -> list[object]:
        return await asyncio.gather(*(committer.run(w) for w in works))

    outcomes = asyncio.run(all_at_once())
    for parity in (0, 1):  # the requests of one account
        mine = outcomes[parity::2]
        assert [isinstance(o, PreparedPayment) for o in mine] == [True] * 3 + [False] * 3
        assert all(isinstance(o, SpendCapExceeded) for o in mine[3:])
    with runtime.db.read() as conn:
        spent = conn.exec_driver_sql("SELECT spent FROM spend_windows").scalars().all()
        refusals = conn.exec_driver_sql("SELECT count(*) FROM refusals").scalar_one()
    assert sorted(spent) == [30_000] * 4  # both accounts, both windows
    assert refusals == 6


def test_a_batch_across_midnight_charges_each_day_its_own(runtime, signing_store, clock) -> None:
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    key, account_id = new_account(
        runtime, {"perPayment": None, "daily": 20_000, "monthly": 100_000}
    )
    body = signature_body(amount="10000")
    clock.current = day_window(NOW).resets_at - 1
    before = [signing_work(deps, by_api_key(key), body, sandbox=False) for _ in range(3)]
    clock.advance(2)
    after = [signing_work(deps, by_api_key(key), body, sandbox=False) for _ in range(3)]
    committer = signing_committer(deps)

    async def all_at_once() -> list[object]:
        return await asyncio.gather(*(committer.run(w) for w in before + after))

    outcomes = asyncio.run(all_at_once())
    assert [isinstance(o, PreparedPayment) for o in outcomes] == [True, True, False] * 2
    with runtime.db.read() as conn:
        days = [day_window(NOW), day_window(clock.now())]
        assert [policy_repo.spent_in(conn, account_id, d) for d in days] == [20_000, 20_000]
        assert policy_repo.spent_in(conn, account_id, month_window(NOW)) == 40_000


def test_after_a_refused_first_payment_smaller_ones_still_fit(runtime, signing_store) -> None:
    """The refused first payment makes the batch lock and read the windows (``lock_windows``);
    the payments after it are checked against what was read."""
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    key, account_id = new_account(runtime, {"perPayment": None, "daily": 25_000, "monthly": None})
    committer = signing_committer(deps)

    def pay(amount: int) -> object:
        return signing_work(
            deps, by_api_key(key), signature_body(amount=str(amount)), sandbox=False
        )

    async def batch(amounts: list[int]) -> list[object]:
        return await asyncio.gather(*(committer.run(pay(a)) for a in amounts))

    assert isinstance(asyncio.run(batch([20_000]))[0], PreparedPayment)
    outcomes = asyncio.run(batch([10_000, 5_000, 1_000]))
    assert [type(o) for o in outcomes] == [SpendCapExceeded, PreparedPayment, SpendCapExceeded]
    with runtime.db.read() as conn:
        assert policy_repo.spent_in(conn, account_id, day_window(NOW)) == 25_000
        assert policy_repo.spent_in(conn, account_id, month_window(NOW)) == 25_000
