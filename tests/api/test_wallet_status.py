"""``GET /wallets/status`` over real HTTP on SQLite and PostgreSQL: the room left under each
cap after real signatures, the approvals queue and a given seller in it, the key's expiry."""

from __future__ import annotations

import httpx

from conftest import FrozenClock, signature_body
from paysign.bootstrap import Runtime
from paysign.policy.caps import day_window, hour_window, iso, month_window
from paysign.services import policy

PENDING_URL = "https://unvetted.example.com/v1/data?x=1"


def status(http: httpx.Client, key: str, **params: str) -> httpx.Response:
    return http.get("/wallets/status", params=params, headers={"Authorization": f"Bearer {key}"})


def test_status_reports_spend_pending_and_expiry(
    http: httpx.Client, runtime: Runtime, clock: FrozenClock, account: dict[str, str]
) -> None:
    key = {"Authorization": f"Bearer {account['api_key']}"}
    live = signature_body(network="eip155:8453", amount="250000")
    assert http.post("/wallets/signatures", json=live, headers=key).status_code == 200
    sandbox = signature_body(amount="400000")  # sandbox payments are never capped
    sandboxed = http.post(
        "/wallets/signatures", json=sandbox, headers={**key, "X-Sandbox-Mode": "true"}
    )
    assert sandboxed.status_code == 200
    unvetted = signature_body(network="eip155:8453", seller_url=PENDING_URL)
    refused = http.post("/wallets/signatures", json=unvetted, headers=key)
    assert refused.json()["type"].endswith("/allow-pending")

    r = status(http, account["api_key"], seller=PENDING_URL)
    assert r.status_code == 200, r.text
    body = r.json()
    caps = {c["cap"]: c for c in body["caps"]}
    assert caps["perPayment"] == {
        "cap": "perPayment",
        "limitUsdc": "1",
        "spentUsdc": "0",
        "remainingUsdc": "1",
        "resetsAt": None,
    }
    now = clock.now()
    assert caps["daily"] == {
        "cap": "daily",
        "limitUsdc": "10",
        "spentUsdc": "0.25",
        "remainingUsdc": "9.75",
        "resetsAt": iso(day_window(now).resets_at),
    }
    assert caps["monthly"]["remainingUsdc"] == "99.75"
    assert caps["monthly"]["resetsAt"] == iso(month_window(now).resets_at)
    assert body["canSpendNowUsdc"] == "1"
    assert body["pendingApprovals"] == {"total": 1, "sellers": ["unvetted.example.com/v1/data"]}
    assert body["seller"] == {"seller": "unvetted.example.com/v1/data", "pendingApproval": True}
    assert body["frozen"] is False
    assert body["walletAddress"] == account["wallet"]
    assert body["apiKeyExpiresAt"] == iso(now + 30 * 86_400)
    assert body["sandbox"]["balanceUsdc"] is None  # no sandbox chain configured here
    assert body["asOf"] == iso(now)

    other = status(http, account["api_key"], seller="api.example.com/weather").json()
    assert other["seller"] == {"seller": "api.example.com/weather", "pendingApproval": False}

    # The next UTC day starts afresh.
    clock.advance(day_window(now).resets_at - now)
    caps = {c["cap"]: c for c in status(http, account["api_key"]).json()["caps"]}
    assert caps["daily"]["spentUsdc"] == "0" and caps["monthly"]["spentUsdc"] == "0.25"


def test_an_hourly_cap_is_reported_when_set(
    http: httpx.Client, runtime: Runtime, clock: FrozenClock, account: dict[str, str]
) -> None:
    document = policy.get_policy(runtime.db, email=account["email"])
    document["caps"]["hourly"] = 500_000
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)
    key = {"Authorization": f"Bearer {account['api_key']}"}
    live = signature_body(network="eip155:8453", amount="200000")
    assert http.post("/wallets/signatures", json=live, headers=key).status_code == 200
    body = status(http, account["api_key"]).json()
    assert [c["cap"] for c in body["caps"]][:2] == ["perPayment", "hourly"]
    hourly = body["caps"][1]
    assert hourly["remainingUsdc"] == "0.3"
    assert hourly["resetsAt"] == iso(hour_window(clock.now()).resets_at)
    assert body["canSpendNowUsdc"] == "0.3"


def test_each_sellers_budget_is_reported_with_its_room(
    http: httpx.Client, runtime: Runtime, clock: FrozenClock, account: dict[str, str]
) -> None:
    document = policy.get_policy(runtime.db, email=account["email"])
    document["allow"] = [
        {"seller": "api.example.com/weather", "daily": 500_000, "monthly": 2_000_000},
        {"seller": "api.example.com/quotes", "monthly": 300_000},
        "other.example.com",
    ]
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)
    key = {"Authorization": f"Bearer {account['api_key']}"}
    live = signature_body(network="eip155:8453", amount="200000")  # to api.example.com/weather
    assert http.post("/wallets/signatures", json=live, headers=key).status_code == 200

    body = status(http, account["api_key"]).json()
    now = clock.now()
    day, month = iso(day_window(now).resets_at), iso(month_window(now).resets_at)
    assert body["sellerBudgets"] == {
        "total": 2,
        "budgets": [
            {
                "rule": "api.example.com/quotes",
                "cap": "monthly",
                "limitUsdc": "0.3",
                "spentUsdc": "0",
                "remainingUsdc": "0.3",
                "resetsAt": month,
            },
            {
                "rule": "api.example.com/weather",
                "cap": "daily",
                "limitUsdc": "0.5",
                "spentUsdc": "0.2",
                "remainingUsdc": "0.3",
                "resetsAt": day,
            },
            {
                "rule": "api.example.com/weather",
                "cap": "monthly",
                "limitUsdc": "2",
                "spentUsdc": "0.2",
                "remainingUsdc": "1.8",
                "resetsAt": month,
            },
        ],
    }
    # The next UTC day starts the rule's daily budget afresh; its month goes on.
    clock.advance(day_window(now).resets_at - now)
    budgets = status(http, account["api_key"]).json()["sellerBudgets"]["budgets"]
    assert [(b["cap"], b["spentUsdc"]) for b in budgets[1:]] == [("daily", "0"), ("monthly", "0.2")]


def test_without_budgets_none_are_listed(http: httpx.Client, account: dict[str, str]) -> None:
    body = status(http, account["api_key"]).json()
    assert body["sellerBudgets"] == {"total": 0, "budgets": []}


def test_a_frozen_account_can_spend_nothing(
    http: httpx.Client, runtime: Runtime, account: dict[str, str]
) -> None:
    policy.freeze_spending(runtime.db, runtime.clock, email=account["email"], frozen=True)
    body = status(http, account["api_key"]).json()
    assert body["frozen"] is True and body["canSpendNowUsdc"] == "0"


def test_status_refuses_without_a_key(http: httpx.Client) -> None:
    for key in (None, "psk_" + "x" * 43):
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        r = http.get("/wallets/status", headers=headers)
        assert r.status_code == 401 and r.json() == {"message": "Unauthorized"}


def test_an_unknown_query_parameter_is_refused(http: httpx.Client, account: dict[str, str]) -> None:
    for params in ({"sellers": "api.example.com"}, [("seller", "a.example"), ("seller", "b")]):
        r = http.get(
            "/wallets/status",
            params=params,
            headers={"Authorization": f"Bearer {account['api_key']}"},
        )
        assert r.status_code == 400, r.text
        assert r.json()["type"].endswith("/malformed-request")


def test_a_seller_the_policy_cannot_judge_is_never_pending(
    http: httpx.Client, account: dict[str, str]
) -> None:
    """Such a seller is refused outright, so it never waits for approval: said, not a 400."""
    for seller in ("https://api.example.com/a%00b", "", "x" * 5000):
        r = status(http, account["api_key"], seller=seller)
        assert r.status_code == 200, r.text
        assert r.json()["seller"] == {"seller": seller[:300], "pendingApproval": False}


def test_the_openapi_document_describes_it(http: httpx.Client) -> None:
    operation = http.get("/openapi.json").json()["paths"]["/wallets/status"]["get"]
    assert operation["operationId"] == "getWalletStatus"
    assert {"200", "400", "401"} <= set(operation["responses"])
