"""Migration 0009: rules and pending sellers stored in the old canonical seller address are
re-written in today's, so a holder's deny keeps denying after the upgrade (SQLite and
PostgreSQL)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from conftest import REGISTRY, TEST_MASTER_KEY, FrozenClock, migrate_to, signature_body
from paysign.custody import EnvelopeVault
from paysign.errors import SellerDenied
from paysign.policy.decide import Grant, Outcome, PolicySettings, Tier, decide
from paysign.policy.rules import Rule
from paysign.policy.seller import seller_location
from paysign.services import accounts, keys
from paysign.services.signing import SigningDeps, sign_payment
from paysign.store.database import Database
from paysign.store.migrate import migrate
from paysign.store.schema import pending_sellers, policy_rules
from paysign.store.signing_store import signing_store_for

VAULT = EnvelopeVault(TEST_MASTER_KEY)
PAY_TO_OLD = "0x" + "11" * 20
PAY_TO_NEW = "0x" + "22" * 20
LONG_PATH = "/" + "%C3%A9" * 340


@pytest.fixture
def old_db(database_url: str) -> Iterator[Database]:
    """A database at 0008, the schema the old canonical form was written under."""
    database = Database(database_url)
    migrate_to(database, "0008")
    yield database
    database.dispose()


def _account(db: Database, clock: FrozenClock) -> tuple[str, str]:
    email = f"upgrade-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(db, VAULT, clock, email=email, password="p" * 12)
    return email, created.account_id


def _rules(db: Database, account_id: str, *rules: tuple[str, str, str]) -> None:
    with db.write() as conn:
        conn.execute(
            policy_rules.insert(),
            [
                {"account_id": account_id, "kind": k, "host": h, "path": p, "created_at": 1}
                for k, h, p in rules
            ],
        )


def _stored_rules(db: Database, account_id: str) -> set[tuple[str, str, str]]:
    with db.read() as conn:
        rows = conn.execute(
            sa.select(policy_rules.c.kind, policy_rules.c.host, policy_rules.c.path).where(
                policy_rules.c.account_id == account_id
            )
        ).all()
    return {tuple(r) for r in rows}


def test_rules_are_rewritten_merged_or_left_where_no_url_can_reach_them(old_db: Database) -> None:
    clock = FrozenClock()
    _, account_id = _account(old_db, clock)
    _, other_id = _account(old_db, clock)
    _rules(
        old_db,
        account_id,
        ("deny", "[::ffff:a00:1]", "/"),
        ("deny", "api.example.com", "/admin;x=1"),
        ("deny", "[::ffff:a00:1]:8443", "/v1/..;/internal"),
        # Typed in 355 characters; escaped, longer than a rule may be typed.
        ("deny", "[::a00:4]", LONG_PATH),
        # Already canonical, and two old spellings of it: one rule remains.
        ("allow", "10.0.0.2", "/v1"),
        ("allow", "[::a00:2]", "/v1"),
        ("allow", "10.0.0.2", "/v1;jsessionid=1"),
        # Two old spellings of a rule not yet stored in the new form: one remains.
        ("allow", "[::ffff:a00:3]", "/shop"),
        ("allow", "[::a00:3]", "/shop;x=1"),
        # Refused by today's parser (a segment ending in a dot): no URL reaches it.
        ("deny", "api.example.com", "/files/report."),
        ("allow", "api.example.com", "/"),
        ("allow", "*.example.org", "/v1"),
        ("allow", "[2001:db8::1]", "/"),
    )
    _rules(old_db, other_id, ("deny", "[::ffff:a00:1]", "/"), ("allow", "10.0.0.3", "/shop"))

    migrate(old_db)

    assert _stored_rules(old_db, account_id) == {
        ("deny", "10.0.0.1", "/"),
        ("deny", "api.example.com", "/admin"),
        ("deny", "10.0.0.1:8443", "/internal"),
        ("deny", "10.0.0.4", LONG_PATH),
        ("allow", "10.0.0.2", "/v1"),
        ("allow", "10.0.0.3", "/shop"),
        ("deny", "api.example.com", "/files/report."),
        ("allow", "api.example.com", "/"),
        ("allow", "*.example.org", "/v1"),
        ("allow", "[2001:db8::1]", "/"),
    }
    # Each account's rules are its own: nothing merges across accounts.
    assert _stored_rules(old_db, other_id) == {
        ("deny", "10.0.0.1", "/"),
        ("allow", "10.0.0.3", "/shop"),
    }


def _pending(host: str, path: str, first: int, last: int, count: int, **terms: object) -> dict:
    return {
        "host": host,
        "path": path,
        "first_seen": first,
        "last_seen": last,
        "refused_count": count,
        "pay_to": terms.get("pay_to"),
        "amount": terms.get("amount"),
        "network": terms.get("network"),
    }


def test_pending_sellers_are_rewritten_merged_settled_or_dropped(old_db: Database) -> None:
    clock = FrozenClock()
    _, account_id = _account(old_db, clock)
    _rules(old_db, account_id, ("deny", "[::ffff:a00:1]", "/"))
    old_terms = {"pay_to": PAY_TO_OLD, "amount": 5, "network": "eip155:8453"}
    new_terms = {"pay_to": PAY_TO_NEW, "amount": 7, "network": "eip155:84532"}
    entries = [
        # Three spellings of 10.0.0.9/pay; the one refused last has the terms kept.
        _pending("[::ffff:a00:9]", "/pay", 100, 200, 2, **old_terms),
        _pending("10.0.0.9", "/pay;v=1", 50, 300, 3, **new_terms),
        _pending("10.0.0.9", "/pay", 150, 250, 1),
        # Decided by the migrated deny on 10.0.0.1: settled, as a new rule settles them.
        _pending("[::ffff:a00:1]", "/x", 10, 20, 1, **old_terms),
        # No longer a URL anyone can pay.
        _pending("shop.example", "/cart.", 10, 20, 1),
        _pending('bad"host.example', "/", 10, 20, 1),
        # Unchanged; ":443" on a host is an http URL's, and stays.
        _pending("new.example.net", "/v1", 10, 20, 4, **old_terms),
        _pending("plain.example:443", "/", 10, 20, 1),
    ]
    with old_db.write() as conn:
        conn.execute(pending_sellers.insert(), [{"account_id": account_id, **e} for e in entries])

    migrate(old_db)

    with old_db.read() as conn:
        rows = conn.execute(
            sa.select(pending_sellers)
            .where(pending_sellers.c.account_id == account_id)
            .order_by(pending_sellers.c.host)
        ).all()
    assert [tuple(r)[1:] for r in rows] == [
        ("10.0.0.9", "/pay", 50, 300, 6, PAY_TO_NEW, 7, "eip155:84532"),
        ("new.example.net", "/v1", 10, 20, 4, PAY_TO_OLD, 5, "eip155:8453"),
        ("plain.example:443", "/", 10, 20, 1, None, None, None),
    ]


def test_a_deny_stored_in_the_old_form_refuses_payments_again_after_the_upgrade(
    old_db: Database,
) -> None:
    clock = FrozenClock()
    email, account_id = _account(old_db, clock)
    _rules(
        old_db,
        account_id,
        ("allow", "api.example.com", "/"),
        ("deny", "[::ffff:a00:1]", "/"),
        ("deny", "api.example.com", "/admin;x=1"),
    )
    # Before the upgrade the denies match nothing: today's decision on the rules as stored is
    # the regression this migration ends. (Today's signing code cannot run on this schema: it
    # reads columns later migrations add.) The payment to 10.0.0.1 was then queued for approval.
    stored = [
        Grant(kind, Rule(host, path)) for kind, host, path in _stored_rules(old_db, account_id)
    ]

    def decided(url: str) -> Outcome:
        return decide(
            PolicySettings.defaults(), stored, seller_location(url), Tier.OPEN_ECOSYSTEM
        ).outcome

    assert decided("https://10.0.0.1/x") is Outcome.PENDING
    assert decided("https://api.example.com/admin;x=1") is Outcome.ALLOWED
    with old_db.write() as conn:
        conn.execute(
            pending_sellers.insert().values(
                account_id=account_id,
                **_pending("10.0.0.1", "/x", 1, 1, 1),
            )
        )

    migrate(old_db)
    api_key = keys.issue_key(old_db, clock, email=email, expires_in_days=30).api_key
    store = signing_store_for(old_db)
    deps = SigningDeps(store, VAULT, clock, REGISTRY)

    def sign(url: str) -> object:
        return sign_payment(deps, api_key, signature_body(seller_url=url), sandbox=False)

    try:
        for url in (
            "https://10.0.0.1/x",
            "https://[::ffff:10.0.0.1]/x",
            "https://api.example.com/admin;x=1",
            "https://api.example.com/admin/users",
        ):
            with pytest.raises(SellerDenied):
                sign(url)
        assert sign("https://api.example.com/weather") is not None
    finally:
        store.close()
    # The seller refused for want of approval before the upgrade is now decided by the deny.
    with old_db.read() as conn:
        waiting = conn.execute(
            sa.select(pending_sellers.c.host).where(pending_sellers.c.account_id == account_id)
        ).all()
    assert waiting == []
