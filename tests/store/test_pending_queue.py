"""The approvals queue's bound is the database's: two writers (two signing stores, as two
processes have) racing for its last place cannot both take it, on SQLite and PostgreSQL. And a
payment the policy allows never touches the queue."""

from __future__ import annotations

import secrets
import threading
import time

import pytest
import sqlalchemy as sa

from conftest import signature_body
from paysign.bootstrap import Runtime
from paysign.errors import AllowPending
from paysign.policy.decide import MAX_PENDING_SELLERS
from paysign.policy.seller import SellerLocation
from paysign.services import accounts, keys, policy
from paysign.services.signing import SigningDeps, sign_payment
from paysign.store import pending_queue
from paysign.store.pending_queue import PendingEntry
from paysign.store.schema import pending_sellers
from paysign.store.signing_store import SigningStore, signing_store_for

NOW = 1_790_000_000


def _account(runtime: Runtime) -> tuple[str, str]:
    email = f"queue-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email=email, password="p" * 12
    )
    return email, created.account_id


def _waiting(runtime: Runtime, account_id: str) -> set[str]:
    with runtime.db.read() as conn:
        rows = conn.execute(
            sa.select(pending_sellers.c.host).where(pending_sellers.c.account_id == account_id)
        ).all()
    return {r.host for r in rows}


def _entry(account_id: str, host: str) -> PendingEntry:
    return PendingEntry(
        account_id, SellerLocation(host, "/"), "0x" + "22" * 20, 1, "eip155:84532", NOW
    )


def test_two_writers_racing_for_the_last_place_add_one(
    runtime: Runtime, signing_store: SigningStore
) -> None:
    _, account_id = _account(runtime)
    with runtime.db.write() as conn:
        conn.execute(
            pending_sellers.insert(),
            [
                {
                    "account_id": account_id,
                    "host": f"old-{i}.example",
                    "path": "/",
                    "first_seen": NOW,
                    "last_seen": NOW,
                    "refused_count": 1,
                }
                for i in range(MAX_PENDING_SELLERS - 1)
            ],
        )
    other_process = signing_store_for(runtime.db)  # its own connection, like another process
    answers: dict[str, bool] = {}

    def second_writer() -> None:
        with other_process.transaction() as tx:
            answers["second"] = tx.admit_pending(
                _entry(account_id, "b.example"), MAX_PENDING_SELLERS
            )

    try:
        with signing_store.transaction() as tx:
            answers["first"] = tx.admit_pending(
                _entry(account_id, "a.example"), MAX_PENDING_SELLERS
            )
            racer = threading.Thread(target=second_writer)
            racer.start()
            time.sleep(0.5)
            # It counted nothing yet: it waits for this transaction, whose entry is unwritten.
            assert racer.is_alive() and "second" not in answers
        racer.join(timeout=30)
    finally:
        other_process.close()
    assert answers == {"first": True, "second": False}
    waiting = _waiting(runtime, account_id)
    assert len(waiting) == MAX_PENDING_SELLERS and "a.example" in waiting


def test_an_allowed_payment_does_not_touch_the_queue(
    runtime: Runtime, signing_store: SigningStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    email, account_id = _account(runtime)
    policy.decide_seller(
        runtime.db, runtime.clock, email=email, seller="api.example.com", kind="allow"
    )
    key = keys.issue_key(runtime.db, runtime.clock, email=email, expires_in_days=9).api_key
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    calls: list[str] = []
    for name in ("lock_pending", "pending_state"):
        for cls in (pending_queue.PendingStatements, pending_queue.PostgresPendingStatements):
            if name in vars(cls):
                original = vars(cls)[name]

                def spy(self: object, *args: object, _f=original, _n=name) -> object:
                    calls.append(_n)
                    return _f(self, *args)

                monkeypatch.setattr(cls, name, spy)

    sign_payment(deps, key, signature_body(), sandbox=False)
    assert calls == []  # the common case: no query for the queue
    with pytest.raises(AllowPending):
        sign_payment(
            deps, key, signature_body(seller_url="https://new.example.net/x"), sandbox=False
        )
    assert calls == ["lock_pending", "pending_state"]
    assert _waiting(runtime, account_id) == {"new.example.net"}
