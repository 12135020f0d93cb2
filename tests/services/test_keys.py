from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from paysign.bootstrap import Runtime
from paysign.errors import AccountNotFound, ActiveKeyExists, InvalidKeyExpiry, NoActiveKey
from paysign.services import accounts, keys
from paysign.store.schema import api_keys

DAY = 86_400


def holder_of(store, clock, presented):
    """The key's holder as the signing path sees it, or None."""
    with store.transaction() as tx:
        return (
            None
            if not keys.looks_like_api_key(presented or "")
            else tx.key_holder(keys.hash_api_key(presented), clock.now())
        )


@pytest.fixture
def email(runtime: Runtime) -> str:
    accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email="k@example.com", password="long enough pass"
    )
    return "k@example.com"


def test_issued_key_authenticates_and_is_stored_only_as_hash(
    runtime, email, clock, signing_store
) -> None:
    issued = keys.issue_key(runtime.db, clock, email=email, expires_in_days=7)
    assert keys.looks_like_api_key(issued.api_key)
    assert issued.expires_at == clock.now() + 7 * DAY
    assert "psk_" not in repr(issued).replace("psk_…", "")
    holder = holder_of(signing_store, clock, issued.api_key)
    assert holder is not None and holder.account_id
    with runtime.db.read() as conn:
        row = conn.execute(api_keys.select()).one()
    assert issued.api_key.encode() not in row.key_hash
    assert row.key_hash == keys.hash_api_key(issued.api_key)
    assert row.display_prefix == issued.api_key[:8]


@pytest.mark.parametrize("days", [0, -1, 366, 10_000])
def test_expiry_outside_1_to_365_days_is_refused(
    runtime, email, clock, signing_store, days
) -> None:
    with pytest.raises(InvalidKeyExpiry):
        keys.issue_key(runtime.db, clock, email=email, expires_in_days=days)
    with runtime.db.read() as conn:
        assert conn.execute(api_keys.select()).first() is None


def test_365_days_is_allowed(runtime, email, clock, signing_store) -> None:
    assert keys.issue_key(runtime.db, clock, email=email, expires_in_days=365).expires_at == (
        clock.now() + 365 * DAY
    )


def test_second_active_key_is_refused_until_revoked(runtime, email, clock, signing_store) -> None:
    first = keys.issue_key(runtime.db, clock, email=email)
    with pytest.raises(ActiveKeyExists):
        keys.issue_key(runtime.db, clock, email=email)
    keys.revoke_key(runtime.db, clock, email=email)
    assert holder_of(signing_store, clock, first.api_key) is None
    second = keys.issue_key(runtime.db, clock, email=email)
    assert holder_of(signing_store, clock, second.api_key) is not None


def test_expired_key_stops_working_and_frees_the_slot(runtime, email, clock, signing_store) -> None:
    old = keys.issue_key(runtime.db, clock, email=email, expires_in_days=1)
    clock.advance(DAY - 1)
    assert holder_of(signing_store, clock, old.api_key) is not None
    clock.advance(1)
    assert holder_of(signing_store, clock, old.api_key) is None
    new = keys.issue_key(runtime.db, clock, email=email)
    assert holder_of(signing_store, clock, new.api_key) is not None


def test_revoking_without_active_key_says_so(runtime, email, clock, signing_store) -> None:
    with pytest.raises(NoActiveKey):
        keys.revoke_key(runtime.db, clock, email=email)


def test_unknown_account(runtime, clock) -> None:
    with pytest.raises(AccountNotFound):
        keys.issue_key(runtime.db, clock, email="nobody@example.com")


@pytest.mark.parametrize(
    "presented", [None, "", "psk_short", "Bearer x", "psk_" + "A" * 43, "psk_" + "!" * 43]
)
def test_malformed_or_unknown_keys_do_not_authenticate(
    runtime, email, clock, signing_store, presented
) -> None:
    keys.issue_key(runtime.db, clock, email=email)
    assert holder_of(signing_store, clock, presented) is None


def test_concurrent_issuers_get_exactly_one_active_key(
    runtime, email, clock, signing_store
) -> None:
    def attempt(_: int) -> str:
        try:
            keys.issue_key(runtime.db, clock, email=email)
            return "issued"
        except ActiveKeyExists:
            return "refused"

    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(attempt, range(32)))
    assert outcomes.count("issued") == 1
    assert outcomes.count("refused") == 31
    with runtime.db.read() as conn:
        active = conn.execute(api_keys.select().where(api_keys.c.revoked_at.is_(None))).all()
    assert len(active) == 1


def test_bearer_token_parsing() -> None:
    assert keys.bearer_token("Bearer abc") == "abc"
    assert keys.bearer_token("bearer   abc ") == "abc"
    assert keys.bearer_token("Basic abc") is None
    assert keys.bearer_token("Bearer") is None
    assert keys.bearer_token(None) is None
