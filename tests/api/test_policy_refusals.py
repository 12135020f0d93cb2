"""The policy beyond the allow list and the caps, over real HTTP on SQLite and PostgreSQL: a
listed seller held to its listing, a frozen account, payee rules."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from conftest import PAY_TO, TEST_MASTER_KEY, LiveServer, ok_json, paysign, signature_body
from paysign.bootstrap import Runtime
from paysign.policy.caps import day_window, hour_window, iso
from paysign.services import policy
from paysign.services.catalog import demo_catalog, import_catalog
from paysign.store import policy_repo
from paysign.store import repositories as repo
from paysign.store.schema import spend_windows

SELLERS = "https://sellers.example.com"
#: The demo catalog's market_quote listing (Premium, 0.01 USDC) at SELLERS.
QUOTE_URL = f"{SELLERS}/market/v1/quote/ACME"
QUOTE_PRICE = 10_000
OTHER_PAYEE = "0x" + "ab" * 20


@pytest.fixture
def listed_http(runtime: Runtime) -> Iterator[httpx.Client]:
    """The API with the demo catalog listed at SELLERS, paid to PAY_TO (imported before the
    server starts, so its first catalog snapshot has the listings)."""
    from paysign.app import create_app

    import_catalog(runtime.db, runtime.clock, demo_catalog(SELLERS))
    settings = runtime.settings.model_copy(update={"catalog_pay_to": PAY_TO})
    with (
        LiveServer(create_app(dataclasses.replace(runtime, settings=settings))) as server,
        httpx.Client(base_url=server.url, timeout=10) as client,
    ):
        yield client


def sign(
    http: httpx.Client,
    key: str,
    *,
    url: str = QUOTE_URL,
    amount: int = QUOTE_PRICE,
    pay_to: str | None = None,
    network: str = "eip155:8453",
    sandbox: bool = False,
) -> httpx.Response:
    body = signature_body(seller_url=url, amount=str(amount), network=network)
    if pay_to is not None:
        body["paymentRequired"]["accepts"][0]["payTo"] = pay_to  # type: ignore[index]
    headers = {"Authorization": f"Bearer {key}"}
    if sandbox:
        headers["X-Sandbox-Mode"] = "true"
    return http.post("/wallets/signatures", json=body, headers=headers)


def ledger(runtime: Runtime, account: dict[str, str]) -> tuple[list, list]:
    with runtime.db.read() as conn:
        return (
            repo.signatures_of(conn, account["account_id"]),
            list(policy_repo.refusals_of(conn, account["account_id"])),
        )


# --- a listed seller held to its listing ----------------------------------------------------


def test_a_listed_seller_is_paid_at_or_below_its_listed_price(listed_http, account) -> None:
    for amount in (QUOTE_PRICE, QUOTE_PRICE - 1):
        response = sign(listed_http, account["api_key"], amount=amount)
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("sandbox", [False, True])
def test_terms_above_the_listed_price_are_refused_and_recorded(
    listed_http, account, runtime, sandbox
) -> None:
    network = "eip155:84532" if sandbox else "eip155:8453"
    response = sign(
        listed_http, account["api_key"], amount=QUOTE_PRICE + 1, network=network, sandbox=sandbox
    )
    assert response.status_code == 403, response.text
    problem = response.json()
    assert problem["type"].endswith("/price-above-listing")
    assert problem["title"] == "Price above the seller's listing"
    assert (problem["listing"], problem["listedPrice"], problem["amount"]) == (
        "market_quote",
        QUOTE_PRICE,
        QUOTE_PRICE + 1,
    )
    signed, refusals = ledger(runtime, account)
    assert signed == []
    assert [(r.reason, r.rule, r.sandbox) for r in refusals] == [
        ("price-above-listing", "listing:market_quote", sandbox)
    ]


@pytest.mark.parametrize("sandbox", [False, True])
def test_terms_paying_another_address_than_the_listing_are_refused(
    listed_http, account, runtime, sandbox
) -> None:
    network = "eip155:84532" if sandbox else "eip155:8453"
    response = sign(
        listed_http, account["api_key"], pay_to=OTHER_PAYEE, network=network, sandbox=sandbox
    )
    assert response.status_code == 403, response.text
    problem = response.json()
    assert problem["type"].endswith("/payee-mismatch")
    assert problem["payTo"] == OTHER_PAYEE
    assert problem["listedPayTo"] == PAY_TO.lower()
    assert problem["network"] == network
    signed, refusals = ledger(runtime, account)
    assert signed == []
    assert [r.reason for r in refusals] == ["payee-mismatch"]


def test_the_payee_is_compared_whatever_its_letter_case(listed_http, account, runtime) -> None:
    pay_to = PAY_TO
    for spelling in (pay_to.lower(), "0x" + pay_to[2:].upper()):
        response = sign(listed_http, account["api_key"], pay_to=spelling)
        assert response.status_code == 200, response.text


def test_an_allow_rule_does_not_lift_the_listing(listed_http, account, runtime) -> None:
    policy.decide_seller(
        runtime.db, runtime.clock, email=account["email"], seller=SELLERS, kind="allow"
    )
    response = sign(listed_http, account["api_key"], amount=QUOTE_PRICE * 2)
    assert response.status_code == 403
    assert response.json()["type"].endswith("/price-above-listing")


def test_an_unlisted_path_of_a_listed_host_is_not_held_to_a_listing(
    listed_http, account, runtime
) -> None:
    policy.decide_seller(
        runtime.db, runtime.clock, email=account["email"], seller=SELLERS, kind="allow"
    )
    url = f"{SELLERS}/market/v1/other"
    response = sign(listed_http, account["api_key"], url=url, amount=50_000, pay_to=OTHER_PAYEE)
    assert response.status_code == 200, response.text


def test_a_refusal_leaves_the_spend_windows_untouched(listed_http, account, runtime) -> None:
    assert sign(listed_http, account["api_key"], amount=QUOTE_PRICE * 5).status_code == 403
    assert sign(listed_http, account["api_key"], pay_to=OTHER_PAYEE).status_code == 403
    with runtime.db.read() as conn:
        spent = policy_repo.spent_in(conn, account["account_id"], day_window(runtime.clock.now()))
    assert spent == 0


def test_without_published_payment_details_only_the_price_is_held(account, runtime) -> None:
    from paysign.app import create_app

    import_catalog(runtime.db, runtime.clock, demo_catalog(SELLERS))
    assert runtime.settings.catalog_pay_to is None
    with (
        LiveServer(create_app(runtime)) as server,
        httpx.Client(base_url=server.url, timeout=10) as http,
    ):
        assert sign(http, account["api_key"], pay_to=OTHER_PAYEE).status_code == 200
        over = sign(http, account["api_key"], amount=QUOTE_PRICE + 1)
        assert over.json()["type"].endswith("/price-above-listing")


# --- freeze -------------------------------------------------------------------------------


@pytest.fixture
def admin_env(env: dict[str, str], database_url: str) -> dict[str, str]:
    """``paysign admin`` on this test's database (SQLite's included) and its master key."""
    master_key = base64.urlsafe_b64encode(TEST_MASTER_KEY).rstrip(b"=").decode()
    return {**env, "PAYSIGN_DATABASE_URL": database_url, "PAYSIGN_MASTER_KEY": master_key}


@pytest.mark.parametrize("sandbox", [False, True])
def test_a_frozen_account_is_refused_every_payment_and_keeps_the_catalog(
    http, account, runtime, admin_env, sandbox
) -> None:
    frozen = ok_json(paysign(admin_env, "admin", "freeze", "--email", account["email"]))
    assert frozen == {"email": account["email"], "frozen": True, "changed": True}
    assert policy.get_policy(runtime.db, email=account["email"])["frozen"] is True
    network = "eip155:84532" if sandbox else "eip155:8453"
    url = "https://api.example.com/weather"  # on the allow list
    response = sign(http, account["api_key"], url=url, network=network, sandbox=sandbox)
    assert response.status_code == 403, response.text
    problem = response.json()
    assert problem["type"].endswith("/spending-frozen")
    assert problem["title"] == "Spending is frozen"
    signed, refusals = ledger(runtime, account)
    assert signed == []
    assert [(r.reason, r.rule) for r in refusals] == [("spending-frozen", "frozen")]
    catalog = http.get("/catalog", headers={"Authorization": f"Bearer {account['api_key']}"})
    assert catalog.status_code == 200

    thawed = ok_json(paysign(admin_env, "admin", "unfreeze", "--email", account["email"]))
    assert thawed == {"email": account["email"], "frozen": False, "changed": True}
    response = sign(http, account["api_key"], url=url, network=network, sandbox=sandbox)
    assert response.status_code == 200, response.text


def test_freezing_twice_changes_nothing_the_second_time(account, admin_env) -> None:
    assert ok_json(paysign(admin_env, "admin", "freeze", "--email", account["email"]))["changed"]
    again = ok_json(paysign(admin_env, "admin", "freeze", "--email", account["email"]))
    assert again["changed"] is False


def test_freeze_names_an_unknown_account(admin_env) -> None:
    result = paysign(admin_env, "admin", "freeze", "--email", "nobody@example.com")
    assert result.returncode == 1
    assert "nobody@example.com" in result.stderr


def test_a_frozen_document_round_trips_and_old_documents_mean_unfrozen(account, runtime) -> None:
    doc = policy.get_policy(runtime.db, email=account["email"])
    assert doc["frozen"] is False
    doc["frozen"] = True
    assert policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=doc)[
        "frozen"
    ]
    old = {k: v for k, v in doc.items() if k != "frozen"}  # a document from before freezing
    after = policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=old)
    assert after["frozen"] is False
    assert after["allow"] == doc["allow"]


# --- payee rules ----------------------------------------------------------------------------


def set_payees(runtime: Runtime, email: str, **lists: list[str]) -> None:
    doc = policy.get_policy(runtime.db, email=email)
    doc["payTo"] = {"allow": [], "deny": [], **lists}
    policy.set_policy(runtime.db, runtime.clock, email=email, document=doc)


def test_a_denied_payee_is_refused_before_anything_else(http, account, runtime) -> None:
    set_payees(runtime, account["email"], deny=[PAY_TO.lower()])
    policy.freeze_spending(runtime.db, runtime.clock, email=account["email"], frozen=True)
    response = sign(http, account["api_key"], url="https://api.example.com/weather")
    assert response.status_code == 403, response.text
    problem = response.json()
    assert problem["type"].endswith("/payee-denied")
    assert (problem["payTo"], problem["rule"]) == (PAY_TO, "payTo.deny")
    signed, refusals = ledger(runtime, account)
    assert signed == []
    assert [(r.reason, r.rule) for r in refusals] == [("payee-denied", "payTo.deny")]


@pytest.mark.parametrize("sandbox", [False, True])
def test_a_payee_allow_list_refuses_every_other_payee(http, account, runtime, sandbox) -> None:
    set_payees(runtime, account["email"], allow=[PAY_TO])
    network = "eip155:84532" if sandbox else "eip155:8453"
    url = "https://api.example.com/weather"
    ok = sign(http, account["api_key"], url=url, network=network, sandbox=sandbox)
    assert ok.status_code == 200, ok.text
    other = sign(
        http, account["api_key"], url=url, pay_to=OTHER_PAYEE, network=network, sandbox=sandbox
    )
    assert other.status_code == 403, other.text
    assert other.json()["type"].endswith("/payee-denied")
    assert other.json()["rule"] == "payTo.allow"
    signed, refusals = ledger(runtime, account)
    assert len(signed) == 1
    assert [r.reason for r in refusals] == ["payee-denied"]


def test_an_unlisted_payee_is_paid_when_no_payee_rule_names_it(http, account, runtime) -> None:
    set_payees(runtime, account["email"], deny=["0x" + "cd" * 20])
    response = sign(http, account["api_key"], url="https://api.example.com/weather")
    assert response.status_code == 200, response.text


# --- the hourly cap -------------------------------------------------------------------------


def set_caps(runtime: Runtime, email: str, **caps: int | None) -> None:
    doc = policy.get_policy(runtime.db, email=email)
    doc["caps"].update(caps)
    policy.set_policy(runtime.db, runtime.clock, email=email, document=doc)


def test_concurrent_payments_sign_exactly_what_fits_in_the_hour(
    live_server, account, runtime, clock
) -> None:
    fits = 7
    set_caps(runtime, account["email"], perPayment=None, hourly=fits * 100_000)
    body = signature_body(seller_url="https://api.example.com/weather", amount="100000")
    headers = {"Authorization": f"Bearer {account['api_key']}"}

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=live_server.url, timeout=60) as client:
            return await asyncio.gather(
                *(client.post("/wallets/signatures", json=body, headers=headers) for _ in range(60))
            )

    responses = asyncio.run(burst())
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * fits + [403] * (60 - fits)
    capped = [r.json() for r in responses if r.status_code == 403]
    hour = hour_window(clock.now())
    assert {(p["cap"], p["limit"], p["remaining"], p["resetsAt"]) for p in capped} == {
        ("hourly", fits * 100_000, 0, iso(hour.resets_at))
    }
    signed, refusals = ledger(runtime, account)
    assert sum(s.amount for s in signed) == fits * 100_000
    assert {(r.reason, r.rule) for r in refusals} == {("spend-cap-exceeded", "caps.hourly")}
    with runtime.db.read() as conn:
        assert policy_repo.spent_in(conn, account["account_id"], hour) == fits * 100_000
        day = day_window(clock.now())
        assert policy_repo.spent_in(conn, account["account_id"], day) == fits * 100_000


def test_the_next_hour_has_room_again_and_the_day_still_counts(
    http, account, runtime, clock
) -> None:
    set_caps(runtime, account["email"], perPayment=None, hourly=300_000, daily=500_000)
    url = "https://api.example.com/weather"
    assert sign(http, account["api_key"], url=url, amount=300_000).status_code == 200
    over = sign(http, account["api_key"], url=url, amount=1)
    assert (over.status_code, over.json()["cap"]) == (403, "hourly")
    clock.advance(3_600)
    assert sign(http, account["api_key"], url=url, amount=200_000).status_code == 200
    daily = sign(http, account["api_key"], url=url, amount=1)
    assert (daily.status_code, daily.json()["cap"]) == (403, "daily")
    # A refusal by the day's cap left the hour untouched.
    with runtime.db.read() as conn:
        hour = hour_window(clock.now())
        assert policy_repo.spent_in(conn, account["account_id"], hour) == 200_000


@pytest.mark.parametrize(
    ("caps", "refused_by"),
    [
        ({"perPayment": None, "daily": 1_000_000, "monthly": 2_000_000}, "daily"),
        ({"perPayment": None, "daily": 0}, "daily"),
        ({"perPayment": None, "daily": None, "monthly": 1_000_000}, "monthly"),
    ],
)
def test_the_first_live_payment_of_a_day_is_held_to_the_caps(
    http, account, runtime, caps, refused_by
) -> None:
    """The attack: with no per-payment cap, the first payment of a new day (nothing spent in
    it yet) asks for more than the day's or the month's cap allows, and must be refused."""
    set_caps(runtime, account["email"], **caps)
    url = "https://api.example.com/weather"
    over = sign(http, account["api_key"], url=url, amount=5_000_000)
    assert over.status_code == 403, over.text
    assert (over.json()["type"].rsplit("/", 1)[-1], over.json()["cap"]) == (
        "spend-cap-exceeded",
        refused_by,
    )
    signed, refusals = ledger(runtime, account)
    assert signed == []
    assert [(r.reason, r.rule) for r in refusals] == [("spend-cap-exceeded", f"caps.{refused_by}")]
    with runtime.db.read() as conn:
        windows = conn.execute(
            sa.select(spend_windows.c.spent).where(
                spend_windows.c.account_id == account["account_id"]
            )
        ).scalars()
        assert set(windows) <= {0}


def test_a_payer_paid_for_yesterday_is_held_to_the_caps_of_the_new_day(
    http, account, runtime, clock
) -> None:
    """The same attack on a payer the server knows (PostgreSQL keeps what it read of them):
    yesterday's windows are not today's."""
    set_caps(runtime, account["email"], perPayment=None, daily=1_000_000, monthly=None)
    url = "https://api.example.com/weather"
    assert sign(http, account["api_key"], url=url, amount=500_000).status_code == 200
    clock.advance(86_400)
    over = sign(http, account["api_key"], url=url, amount=5_000_000)
    assert (over.status_code, over.json()["cap"], over.json()["remaining"]) == (
        403,
        "daily",
        1_000_000,
    )
    assert sign(http, account["api_key"], url=url, amount=1_000_000).status_code == 200
    signed, _ = ledger(runtime, account)
    assert [s.amount for s in signed] == [500_000, 1_000_000]


def test_without_an_hourly_cap_no_hourly_window_is_written(http, account, runtime) -> None:
    url = "https://api.example.com/weather"
    assert sign(http, account["api_key"], url=url, amount=1000).status_code == 200
    with runtime.db.read() as conn:
        windows = conn.execute(
            sa.select(spend_windows.c.window).where(
                spend_windows.c.account_id == account["account_id"]
            )
        ).scalars()
        assert sorted(windows) == ["daily", "monthly"]


# --- budgets per seller ---------------------------------------------------------------------


def set_allow(runtime: Runtime, email: str, allow: list[object]) -> None:
    doc = policy.get_policy(runtime.db, email=email)
    doc["allow"] = allow
    policy.set_policy(runtime.db, runtime.clock, email=email, document=doc)


def test_concurrent_payments_sign_exactly_what_fits_in_a_sellers_budget(
    live_server, account, runtime, clock
) -> None:
    fits = 6
    budget = {"seller": "api.example.com/weather", "daily": fits * 50_000}
    set_allow(runtime, account["email"], [budget, "other.example.com"])
    headers = {"Authorization": f"Bearer {account['api_key']}"}

    def body(url: str) -> dict[str, object]:
        return signature_body(seller_url=url, amount="50000")

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=live_server.url, timeout=60) as client:
            calls = [
                client.post(
                    "/wallets/signatures",
                    json=body(f"https://{host}/weather/x"),
                    headers=headers,
                )
                for host in ["api.example.com"] * 40 + ["other.example.com"] * 10
            ]
            return await asyncio.gather(*calls)

    responses = asyncio.run(burst())
    by_host: dict[str, list[int]] = {"api.example.com": [], "other.example.com": []}
    for response in responses:
        host = response.request.content.decode().split("https://")[1].split("/")[0]
        by_host[host].append(response.status_code)
    assert sorted(by_host["api.example.com"]) == [200] * fits + [403] * (40 - fits)
    assert by_host["other.example.com"] == [200] * 10  # no budget on that rule
    capped = [r.json() for r in responses if r.status_code == 403]
    assert {(p["cap"], p["rule"], p["limit"], p["remaining"]) for p in capped} == {
        ("seller.daily", "api.example.com/weather", fits * 50_000, 0)
    }
    signed, refusals = ledger(runtime, account)
    assert sum(s.amount for s in signed) == (fits + 10) * 50_000
    assert {r.rule for r in refusals} == {"allow:api.example.com/weather:daily"}
    with runtime.db.read() as conn:
        day = day_window(clock.now())
        assert policy_repo.spent_in(conn, account["account_id"], day) == (fits + 10) * 50_000


def test_a_sellers_budget_outlives_saving_the_policy_and_skips_sandbox(
    http, account, runtime, clock
) -> None:
    url = "https://api.example.com/weather"
    set_allow(runtime, account["email"], [{"seller": "api.example.com", "monthly": 100_000}])
    assert sign(http, account["api_key"], url=url, amount=60_000).status_code == 200
    # Saved again (the rules are rewritten): what the rule has spent is kept.
    set_allow(runtime, account["email"], [{"seller": "api.example.com", "monthly": 100_000}])
    over = sign(http, account["api_key"], url=url, amount=60_000)
    assert over.status_code == 403, over.text
    assert (over.json()["cap"], over.json()["remaining"]) == ("seller.monthly", 40_000)
    sandbox = sign(
        http, account["api_key"], url=url, amount=60_000, network="eip155:84532", sandbox=True
    )
    assert sandbox.status_code == 200, sandbox.text
    # The account's own caps still apply beside the rule's.
    set_caps(runtime, account["email"], perPayment=None, daily=50_000)
    capped = sign(http, account["api_key"], url=url, amount=30_000)
    assert (capped.status_code, capped.json()["cap"]) == (403, "daily")


# --- the approvals queue holds only what the holder can decide ------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://agentjunk/x",  # a host no rule can name (no dot)
        "https://api.example.net:0/x",  # a port no rule can name
        "https://stuck.example.com/" + "é" * 340,  # a location longer than any rule
    ],
)
def test_a_seller_no_rule_can_name_is_refused_not_queued(http, account, runtime, url) -> None:
    """The attack: an agent fills the approvals queue with sellers the holder can neither
    approve nor deny (every decision starts by writing the seller as a rule), so the queue
    stays full for good and every new seller is refused."""
    refused = sign(http, account["api_key"], url=url, amount=1_000)
    assert refused.status_code == 422, refused.text
    assert refused.json()["type"].endswith("/invalid-payment-terms")
    assert refused.json()["pointer"] == "/sellerUrl"
    with runtime.db.read() as conn:
        assert policy_repo.pending_count(conn, account["account_id"]) == 0
    signed, refusals = ledger(runtime, account)
    assert (signed, refusals) == ([], [])
