"""The activity page: filters, keyset pages of 50 with links that keep the filters, CSV export
of every matching row, and a clear 400 for any bad filter value."""

from __future__ import annotations

import csv
import io
import re
import secrets
from html import unescape

import httpx
import pytest

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.services import accounts
from paysign.store.schema import refusals, signatures
from portal.conftest import error_of, signed_in

T0 = 1_790_000_000  # 2026-09-21T14:13:20Z
DAY = 86_400


def _rows(
    runtime: Runtime,
    account_id: str,
    count: int,
    *,
    refused: bool = False,
    start: int = T0,
    host: str = "api.example.com",
    path: str = "/v1",
    network: str = "eip155:84532",
    sandbox: bool = True,
    amount: int = 10_000,
    status: str = "signed",
    settled_tx: str | None = None,
) -> None:
    """``count`` rows, one second apart, inserted as the signing path would leave them."""
    common = {
        "account_id": account_id,
        "seller_host": host,
        "seller_path": path,
        "network": network,
        "sandbox": sandbox,
        "amount": amount,
    }
    if refused:
        table = refusals
        rows = [
            {
                **common,
                "reason": "allow-pending",
                "rule": "approval.openEcosystem",
                "detail": "waiting",
                "created_at": start + i,
            }
            for i in range(count)
        ]
    else:
        table = signatures
        rows = [
            {
                **common,
                "asset": "0x" + "11" * 20,
                "pay_to": "0x" + "22" * 20,
                "nonce": secrets.token_bytes(32),
                "valid_before": start + i + 60,
                "x402_version": 2,
                "status": status,
                "settled_tx": settled_tx,
                "tier": "STANDARD",
                "rule": host,
                "created_at": start + i,
            }
            for i in range(count)
        ]
    with runtime.db.write() as conn:
        conn.execute(table.insert(), rows)


def _sellers(page: httpx.Response) -> list[str]:
    return re.findall(r'<td class="mono" data-label="Seller">([^<]*)</td>', page.text)


def _link(page: httpx.Response, name: str) -> str | None:
    found = re.search(rf'<a id="{name}" href="([^"]+)"', page.text)
    return unescape(found.group(1)) if found else None


@pytest.fixture
def session(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> httpx.Client:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    signed_in(browser, holder, clock)
    return browser


def test_pages_of_fifty_newest_first_with_links_that_keep_the_filters(
    session: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    _rows(runtime, holder.account_id, 60, path="/keep")
    _rows(runtime, holder.account_id, 60, path="/other", start=T0 + 1_000)
    _rows(runtime, holder.account_id, 7, refused=True, path="/keep", start=T0 + 2_000)
    stranger = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email="s@example.com", password="x" * 20
    )
    _rows(runtime, stranger.account_id, 3, path="/keep/stranger", start=T0 + 3_000)

    first = session.get("/portal/activity", params={"seller": "/KEEP"})
    assert first.status_code == 200
    shown = _sellers(first)
    assert len(shown) == 50 and set(shown) == {"api.example.com/keep"}
    assert first.text.count('<td data-label="Decision">refused') == 7  # the newest rows come first
    assert _link(first, "newer") is None
    older = _link(first, "older")
    assert older is not None and "seller=%2FKEEP" in older and "before=" in older

    second = session.get(older)
    assert len(_sellers(second)) == 17 and _link(second, "older") is None
    newer = _link(second, "newer")
    assert newer is not None and "seller=%2FKEEP" in newer and "after=" in newer
    assert _sellers(session.get(newer)) == shown

    everything = session.get("/portal/activity")
    assert len(_sellers(everything)) == 50 and "stranger" not in everything.text


def test_each_filter_narrows_the_list(
    session: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    me = holder.account_id
    _rows(runtime, me, 1, host="base.example.com", network="eip155:8453", sandbox=False)
    _rows(runtime, me, 1, host="sepolia.example.com", start=T0 + DAY)
    _rows(runtime, me, 1, refused=True, host="refused.example.com", start=T0 + 2 * DAY)

    def sellers(**params: str) -> list[str]:
        page = session.get("/portal/activity", params=params)
        assert page.status_code == 200, page.text
        return [seller.partition("/")[0] for seller in _sellers(page)]

    assert sellers(decision="refused") == ["refused.example.com"]
    assert sellers(decision="signed") == ["sepolia.example.com", "base.example.com"]
    assert sellers(network="base") == ["base.example.com"]  # the v1 name is understood too
    assert sellers(network="eip155:84532", decision="signed") == ["sepolia.example.com"]
    assert sellers(sandbox="no") == ["base.example.com"]
    assert sellers(sandbox="yes") == ["refused.example.com", "sepolia.example.com"]
    # Whole UTC days, both ends included.
    assert sellers(**{"from": "2026-09-22", "to": "2026-09-22"}) == ["sepolia.example.com"]
    assert sellers(**{"from": "2026-09-22"}) == ["refused.example.com", "sepolia.example.com"]
    assert sellers(to="2026-09-21") == ["base.example.com"]
    empty = session.get("/portal/activity", params={"seller": "nowhere"})
    assert 'id="no-activity"' in empty.text and "Nothing matches" in empty.text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"decision": "approved"}, "“decision” must be signed, refused, withdrawn or delivery."),
        ({"network": "ethereum"}, "“network” must be Base or Base Sepolia."),
        ({"sandbox": "maybe"}, "“sandbox” must be yes or no."),
        ({"from": "2026-13-01"}, "“from” must be a date like 2026-01-31 (UTC)."),
        ({"to": "20260101"}, "“to” must be a date like 2026-01-31 (UTC)."),
        ({"from": "2026-02-02", "to": "2026-02-01"}, "“from” must be on or before “to”."),
        ({"seller": "x" * 301}, "“seller” must be printable text of at most 300 characters."),
        ({"before": "1790000000-x-1"}, "This page link is damaged"),
        ({"before": "1-s-1", "after": "1-s-1"}, "either older or newer"),
    ],
)
def test_a_bad_filter_is_a_400_with_the_reason(
    session: httpx.Client, params: dict[str, str], message: str
) -> None:
    page = session.get("/portal/activity", params=params)
    assert page.status_code == 400
    assert message in unescape(error_of(page))
    if "before" not in params:  # the export checks the same filters the same way
        export = session.get("/portal/activity.csv", params=params)
        assert export.status_code == 400 and message in unescape(error_of(export))


def test_csv_export_has_every_matching_row_guarded_against_formulas(
    session: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    me = holder.account_id
    # More than one export batch (1,000 rows), so the batches are stitched together.
    _rows(runtime, me, 1_030, amount=1_500_000)
    # A host may start with "-" (the signing path accepts it): a spreadsheet would compute it.
    _rows(runtime, me, 1, refused=True, host="-2+3.example.com", path="/x", start=T0 + 5_000)
    _rows(runtime, me, 2, network="eip155:8453", start=T0 + 6_000)

    export = session.get("/portal/activity.csv", params={"network": "eip155:84532"})
    assert export.status_code == 200
    assert export.headers["content-type"] == "text/csv; charset=utf-8"
    assert export.headers["content-disposition"] == 'attachment; filename="paysign-activity.csv"'
    assert export.headers["cache-control"] == "no-store"
    table = list(csv.reader(io.StringIO(export.text)))
    assert table[0] == [
        "time_utc",
        "decision",
        "seller",
        "amount_usdc",
        "network",
        "sandbox",
        "status",
        "reason",
        "rule",
        "detail",
        "pay_to",
        "transaction",
        "by",
        "step_up",
        "step_up_utc",
        "target",
        "event",
        "attempts",
        "last_result",
    ]
    body = table[1:]
    assert len(body) == 1_031
    refused, newest_signed, oldest = body[0], body[1], body[-1]
    assert refused[:4] == ["2026-09-21T15:36:40Z", "refused", "'-2+3.example.com/x", "0.010000"]
    assert refused[7] == "allow-pending"
    assert newest_signed[1:6] == [
        "signed",
        "api.example.com/v1",
        "1.500000",
        "eip155:84532",
        "true",
    ]
    assert newest_signed[10] == "0x" + "22" * 20 and refused[10] == ""  # payTo: signed only
    assert oldest[0] == "2026-09-21T14:13:20Z"
    assert len({row[0] for row in body[1:]}) == 1_030  # no row twice across batches

    only_refused = session.get("/portal/activity.csv", params={"decision": "refused"})
    assert len(list(csv.reader(io.StringIO(only_refused.text)))) == 2


def test_activity_needs_a_signed_in_session(browser: httpx.Client) -> None:
    for path in ("/portal/activity", "/portal/activity.csv"):
        response = browser.get(path)
        assert response.status_code == 303 and response.headers["location"] == "/portal/sign-in"


TX = "0x" + "ab" * 30 + "cdef"


def _settlements(page: httpx.Response) -> list[str]:
    return re.findall(r'data-settlement="([a-z]+)"', page.text)


def test_each_payment_shows_whether_it_moved_money_and_filters_and_exports_by_it(
    session: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    me = holder.account_id
    _rows(runtime, me, 1, path="/waiting", start=T0)
    _rows(runtime, me, 1, path="/gone", start=T0 + 10, status="expired", sandbox=False)
    _rows(runtime, me, 1, path="/sandbox-paid", start=T0 + 20, status="settled", settled_tx=TX)
    _rows(
        runtime,
        me,
        1,
        path="/base-paid",
        start=T0 + 30,
        status="settled",
        settled_tx=TX,
        network="eip155:8453",
        sandbox=False,
    )
    _rows(runtime, me, 1, refused=True, path="/refused", start=T0 + 40)

    page = session.get("/portal/activity")
    assert _settlements(page) == ["settled", "settled", "expired", "awaiting"]
    # The hash is shortened; Base links to its explorer, the sandbox chain to nothing.
    assert page.text.count(f'title="{TX}"') == 2
    assert page.text.count("0xabab…cdef") == 2
    assert page.text.count('href="https://basescan.org/tx/') == 1
    assert f'href="https://basescan.org/tx/{TX}"' in page.text
    assert "Expired unused (spend released)" in page.text
    assert "Awaiting settlement until" in page.text

    settled = session.get("/portal/activity", params={"status": "settled"})
    assert _sellers(settled) == ["api.example.com/base-paid", "api.example.com/sandbox-paid"]
    expired = session.get("/portal/activity", params={"status": "expired"})
    assert _sellers(expired) == ["api.example.com/gone"]
    waiting = session.get("/portal/activity", params={"status": "awaiting"})
    assert _sellers(waiting) == ["api.example.com/waiting"]
    assert 'value="awaiting" selected' in waiting.text

    export = session.get("/portal/activity.csv")
    table = list(csv.reader(io.StringIO(export.text)))
    status, transaction = table[0].index("status"), table[0].index("transaction")
    assert [(row[2], row[status], row[transaction]) for row in table[1:]] == [
        ("api.example.com/refused", "", ""),
        ("api.example.com/base-paid", "settled", TX),
        ("api.example.com/sandbox-paid", "settled", TX),
        ("api.example.com/gone", "expired", ""),
        ("api.example.com/waiting", "awaiting", ""),
    ]
    only_settled = session.get("/portal/activity.csv", params={"status": "settled"})
    assert len(list(csv.reader(io.StringIO(only_settled.text)))) == 3


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"status": "paid"}, "“status” must be awaiting, settled or expired."),
        ({"status": "settled", "decision": "refused"}, "A refusal has no settlement status"),
        (
            {"status": "awaiting", "decision": "delivery"},
            "A notification delivery has no settlement status",
        ),
    ],
)
def test_a_bad_status_filter_is_a_clear_400(
    session: httpx.Client, params: dict[str, str], message: str
) -> None:
    for path in ("/portal/activity", "/portal/activity.csv"):
        page = session.get(path, params=params)
        assert page.status_code == 400 and message in unescape(error_of(page))
