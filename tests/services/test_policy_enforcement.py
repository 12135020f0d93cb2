"""The signing use case under the source policy and the caps, on SQLite and PostgreSQL."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import signature_body
from paysign.bootstrap import Runtime
from paysign.errors import (
    AllowPending,
    EcosystemDisabled,
    NotAuthenticated,
    PaymentRefused,
    SellerDenied,
    SpendCapExceeded,
)
from paysign.policy.caps import day_window, hour_window, month_window
from paysign.policy.decide import Tier
from paysign.policy.seller import SellerLocation
from paysign.services import policy
from paysign.services.signing import SigningDeps, sign_payment
from paysign.store import policy_repo
from paysign.store import repositories as repo

USDC = 1_000_000


class CatalogStub:
    """Tier lookup standing in for the catalog: hosts named here are listed sellers."""

    def __init__(self, tiers: dict[str, Tier]) -> None:
        self.tiers = tiers

    def tier_of(self, where: SellerLocation) -> Tier:
        return self.tiers.get(where.host, Tier.OPEN_ECOSYSTEM)


def set_policy(runtime: Runtime, email: str, **changes: object) -> None:
    doc = policy.get_policy(runtime.db, email=email)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(doc[key], dict):
            doc[key].update(value)
        else:
            doc[key] = value
    policy.set_policy(runtime.db, runtime.clock, email=email, document=doc)


@pytest.fixture
def sign(runtime, signing_store):
    def sign_for(
        account,
        *,
        url="https://api.example.com/weather",
        amount=10_000,
        network="eip155:84532",
        sandbox=False,
        tiers=None,
    ):
        lookup = CatalogStub(tiers or {})
        deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry, lookup)
        body = signature_body(seller_url=url, amount=str(amount), network=network)
        return sign_payment(deps, account["api_key"], body, sandbox=sandbox)

    return sign_for


def ledger(runtime, account) -> tuple[list[repo.SignatureRecord], list[policy_repo.RefusalRecord]]:
    with runtime.db.read() as conn:
        return (
            repo.signatures_of(conn, account["account_id"]),
            list(policy_repo.refusals_of(conn, account["account_id"])),
        )


def spent(runtime, account, window) -> int:
    with runtime.db.read() as conn:
        return policy_repo.spent_in(conn, account["account_id"], window)


# --- source policy ------------------------------------------------------------------------


def test_new_open_ecosystem_seller_is_pending_and_recorded(sign, runtime, account) -> None:
    with pytest.raises(AllowPending) as refused:
        sign(account, url="https://new.example.net/v1/quote?x=1")
    assert refused.value.title == "Seller approval pending"
    assert "new.example.net" in refused.value.detail and "/v1/quote" in refused.value.detail
    assert policy.get_policy(runtime.db, email=account["email"])["pending"] == [
        "new.example.net/v1/quote"
    ]
    signatures, refusals = ledger(runtime, account)
    assert signatures == []
    assert [(r.reason, r.rule, r.seller_host) for r in refusals] == [
        ("allow-pending", "approval.openEcosystem", "new.example.net")
    ]


def test_approving_a_pending_seller_lets_the_next_payment_through(sign, runtime, account) -> None:
    with pytest.raises(AllowPending):
        sign(account, url="https://new.example.net/v1/quote")
    policy.decide_seller(
        runtime.db, runtime.clock, email=account["email"], seller="new.example.net/v1", kind="allow"
    )
    assert policy.get_policy(runtime.db, email=account["email"])["pending"] == []
    sign(account, url="https://new.example.net/v1/quote")
    signatures, _ = ledger(runtime, account)
    assert [(s.seller_host, s.rule, s.tier) for s in signatures] == [
        ("new.example.net", "new.example.net/v1", "OPEN_ECOSYSTEM")
    ]


def test_fifty_simultaneous_requests_create_one_pending_record(sign, runtime, account) -> None:
    def attempt(_: int) -> str:
        try:
            sign(account, url="https://fresh.example.org/data")
            return "signed"
        except AllowPending:
            return "pending"

    with ThreadPoolExecutor(max_workers=25) as pool:
        outcomes = list(pool.map(attempt, range(50)))
    assert outcomes == ["pending"] * 50
    with runtime.db.read() as conn:
        pending = policy_repo.pending_of(conn, account["account_id"])
    assert [(p.host, p.path, p.refused_count) for p in pending] == [
        ("fresh.example.org", "/data", 50)
    ]


def test_deny_rule_beats_allow_rule_and_is_named(sign, runtime, account) -> None:
    set_policy(runtime, account["email"], allow=["*.example.com"], deny=["api.example.com/admin"])
    with pytest.raises(SellerDenied) as refused:
        sign(account, url="https://API.example.com:443/x/../admin/%75sers")
    assert refused.value.extensions["rule"] == "api.example.com/admin"
    sign(account, url="https://api.example.com/administrator")  # other segment


def test_deny_applies_in_sandbox_too(sign, runtime, account) -> None:
    set_policy(runtime, account["email"], deny=["api.example.com"], allow=[])
    with pytest.raises(SellerDenied):
        sign(account, sandbox=True)
    _, refusals = ledger(runtime, account)
    assert refusals[0].sandbox is True


@pytest.mark.parametrize(
    ("tier", "switch"),
    [
        (Tier.PREMIUM, "premium"),
        (Tier.STANDARD, "standard"),
        (Tier.OPEN_ECOSYSTEM, "openEcosystem"),
    ],
)
def test_ecosystem_switch_off_refuses_even_allowed_sellers(
    sign, runtime, account, tier, switch
) -> None:
    set_policy(runtime, account["email"], ecosystems={switch: False})
    with pytest.raises(EcosystemDisabled) as refused:
        sign(account, tiers={"api.example.com": tier})
    assert refused.value.extensions["tier"] == tier.value
    with pytest.raises(EcosystemDisabled):
        sign(account, tiers={"api.example.com": tier}, sandbox=True)


def test_listed_sellers_need_no_approval_by_default(sign, runtime, account) -> None:
    sign(
        account,
        url="https://premium.example.io/q",
        tiers={"premium.example.io": Tier.PREMIUM},
    )
    with pytest.raises(AllowPending):
        sign(account, url="https://open.example.io/q")


def test_approval_all_and_none(sign, runtime, account) -> None:
    set_policy(runtime, account["email"], approval="all", allow=[])
    with pytest.raises(AllowPending):
        sign(
            account,
            url="https://std.example.io/q",
            tiers={"std.example.io": Tier.STANDARD},
        )
    set_policy(runtime, account["email"], approval="none")
    sign(account, url="https://anything.example.io/q")


# --- spend caps ---------------------------------------------------------------------------


def test_per_payment_cap(sign, runtime, account) -> None:
    with pytest.raises(SpendCapExceeded) as refused:
        sign(account, amount=USDC + 1)
    assert refused.value.extensions | {} == {
        "cap": "perPayment",
        "limit": USDC,
        "remaining": USDC,
        "amount": USDC + 1,
        "resetsAt": None,
    }
    sign(account, amount=USDC)


def test_daily_cap_counts_live_payments_and_says_when_it_resets(
    sign, runtime, account, clock
) -> None:
    set_policy(runtime, account["email"], caps={"perPayment": None, "daily": 3 * USDC})
    sign(account, amount=2 * USDC)
    with pytest.raises(SpendCapExceeded) as refused:
        sign(account, amount=2 * USDC)
    members = refused.value.extensions
    assert (members["cap"], members["limit"], members["remaining"]) == ("daily", 3 * USDC, USDC)
    assert members["resetsAt"].endswith("T00:00:00Z")
    sign(account, amount=USDC)  # exactly fills the day
    assert spent(runtime, account, day_window(clock.now())) == 3 * USDC
    clock.advance(86_400)
    sign(account, amount=2 * USDC)  # a new UTC day
    assert spent(runtime, account, month_window(clock.now())) == 5 * USDC


def test_a_refused_monthly_reservation_releases_the_daily_one(
    sign, runtime, account, clock
) -> None:
    set_policy(
        runtime,
        account["email"],
        caps={"perPayment": None, "daily": 10 * USDC, "monthly": 3 * USDC},
    )
    sign(account, amount=2 * USDC)
    with pytest.raises(SpendCapExceeded) as refused:
        sign(account, amount=2 * USDC)
    assert refused.value.extensions["cap"] == "monthly"
    assert spent(runtime, account, day_window(clock.now())) == 2 * USDC
    signatures, refusals = ledger(runtime, account)
    assert len(signatures) == 1
    assert [(r.reason, r.rule) for r in refusals] == [("spend-cap-exceeded", "caps.monthly")]


def test_sandbox_payments_neither_check_nor_count(sign, runtime, account, clock) -> None:
    set_policy(runtime, account["email"], caps={"perPayment": USDC, "daily": USDC})
    sign(account, amount=USDC, sandbox=True)
    sign(account, amount=USDC, sandbox=True)  # over every cap, still signed
    assert spent(runtime, account, day_window(clock.now())) == 0
    sign(account, amount=USDC)  # the live cap is untouched by sandbox payments
    assert spent(runtime, account, day_window(clock.now())) == USDC


def test_testnet_payment_without_the_header_counts_as_live(sign, runtime, account, clock) -> None:
    set_policy(runtime, account["email"], caps={"daily": USDC})
    sign(account, amount=USDC, network="eip155:84532")
    with pytest.raises(SpendCapExceeded):
        sign(account, amount=1, network="eip155:84532")
    signatures, _ = ledger(runtime, account)
    assert [s.sandbox for s in signatures] == [False]


def test_null_caps_mean_no_cap_but_spend_is_still_tracked(sign, runtime, account, clock) -> None:
    set_policy(runtime, account["email"], caps={"perPayment": None, "daily": None, "monthly": None})
    for _ in range(3):
        sign(account, amount=5 * USDC)
    assert spent(runtime, account, day_window(clock.now())) == 15 * USDC


def test_concurrent_payments_never_pass_the_daily_cap(sign, runtime, account, clock) -> None:
    k = 7
    set_policy(runtime, account["email"], caps={"perPayment": None, "daily": k * 100_000})

    def attempt(_: int) -> str:
        try:
            sign(account, amount=100_000)
            return "signed"
        except SpendCapExceeded:
            return "capped"

    with ThreadPoolExecutor(max_workers=32) as pool:
        outcomes = list(pool.map(attempt, range(100)))
    assert outcomes.count("signed") == k
    signatures, refusals = ledger(runtime, account)
    assert sum(s.amount for s in signatures) == k * 100_000
    assert spent(runtime, account, day_window(clock.now())) == k * 100_000
    assert len(refusals) == 100 - k


def test_concurrent_payments_never_pass_the_hourly_cap(sign, runtime, account, clock) -> None:
    k = 5
    set_policy(runtime, account["email"], caps={"perPayment": None, "hourly": k * 100_000})

    def attempt(_: int) -> str:
        try:
            sign(account, amount=100_000)
            return "signed"
        except SpendCapExceeded as capped:
            assert capped.extensions["cap"] == "hourly"
            return "capped"

    with ThreadPoolExecutor(max_workers=32) as pool:
        outcomes = list(pool.map(attempt, range(60)))
    assert outcomes.count("signed") == k
    signatures, refusals = ledger(runtime, account)
    assert sum(s.amount for s in signatures) == k * 100_000
    assert spent(runtime, account, hour_window(clock.now())) == k * 100_000
    assert spent(runtime, account, day_window(clock.now())) == k * 100_000
    assert [r.rule for r in refusals] == ["caps.hourly"] * (60 - k)


def test_concurrent_payments_never_pass_a_sellers_budget(sign, runtime, account, clock) -> None:
    k = 4
    budget = {"seller": "api.example.com/weather", "daily": k * 100_000, "monthly": None}
    set_policy(runtime, account["email"], allow=[budget, "api.example.com/other"])

    def attempt(i: int) -> str:
        path = "weather" if i % 2 else "other"
        try:
            sign(account, url=f"https://api.example.com/{path}", amount=100_000)
            return f"{path} signed"
        except SpendCapExceeded as capped:
            assert (capped.extensions["cap"], capped.extensions["rule"]) == (
                "seller.daily",
                "api.example.com/weather",
            )
            return f"{path} capped"

    with ThreadPoolExecutor(max_workers=32) as pool:
        outcomes = list(pool.map(attempt, range(40)))
    assert outcomes.count("weather signed") == k
    assert outcomes.count("other signed") == 20
    signatures, _ = ledger(runtime, account)
    assert sum(s.amount for s in signatures) == (k + 20) * 100_000
    assert spent(runtime, account, day_window(clock.now())) == (k + 20) * 100_000


def test_every_refusal_is_a_payment_refused(sign, runtime, account) -> None:
    for error in (AllowPending, SellerDenied, EcosystemDisabled, SpendCapExceeded):
        assert issubclass(error, PaymentRefused)


def test_activity_lists_every_decision_with_its_rule(sign, runtime, account, clock) -> None:
    from paysign.services.activity import activity

    sign(account, amount=500)
    clock.advance(1)
    with pytest.raises(AllowPending):
        sign(account, url="https://other.example.net/x")
    clock.advance(1)
    with pytest.raises(SpendCapExceeded):
        sign(account, amount=2 * USDC)
    entries = activity(runtime.db, email=account["email"])
    assert [(e["decision"], e.get("reason"), e["rule"]) for e in entries] == [
        ("refused", "spend-cap-exceeded", "caps.perPayment"),
        ("refused", "allow-pending", "approval.openEcosystem"),
        ("signed", None, "api.example.com"),
    ]
    assert entries[2]["status"] == "signed" and entries[2]["amount"] == 500


def test_signing_for_a_signed_in_account_applies_the_same_policy(
    runtime, signing_store, account
) -> None:
    """An OAuth sign-in has no API key: the payer is found by account, same rules and caps."""
    from paysign.services.signing import by_account, sign_payment_for

    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    payer = by_account(account["account_id"])
    signed = sign_payment_for(deps, payer, signature_body(), sandbox=False)
    with pytest.raises(AllowPending):
        sign_payment_for(
            deps, payer, signature_body(seller_url="https://new.example.net/x"), sandbox=False
        )
    with pytest.raises(SpendCapExceeded):
        sign_payment_for(deps, payer, signature_body(amount=str(2 * USDC)), sandbox=False)
    signatures, refusals = ledger(runtime, account)
    assert [(s.nonce, s.api_key_id) for s in signatures] == [(signed.nonce, None)]
    assert [r.reason for r in refusals] == ["allow-pending", "spend-cap-exceeded"]
    with pytest.raises(NotAuthenticated):
        sign_payment_for(deps, by_account("no-such-account"), signature_body(), sandbox=False)


def test_a_signed_in_accounts_first_payment_of_the_day_is_held_to_the_daily_cap(
    runtime, signing_store, account
) -> None:
    """The first payment of a window by an OAuth payer reaches the database's reservation
    with nothing spent yet: with no per-payment cap, it must still be refused past the day's."""
    from paysign.services.signing import by_account, sign_payment_for

    set_policy(runtime, account["email"], caps={"perPayment": None, "daily": USDC, "monthly": None})
    deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
    payer = by_account(account["account_id"])
    with pytest.raises(SpendCapExceeded) as refused:
        sign_payment_for(deps, payer, signature_body(amount=str(5 * USDC)), sandbox=False)
    assert (refused.value.extensions["cap"], refused.value.extensions["remaining"]) == (
        "daily",
        USDC,
    )
    sign_payment_for(deps, payer, signature_body(amount=str(USDC)), sandbox=False)
    signatures, _ = ledger(runtime, account)
    assert [s.amount for s in signatures] == [USDC]
