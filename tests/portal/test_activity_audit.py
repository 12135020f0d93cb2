"""The activity page and its CSV export audit what left the service for the holder, on SQLite
and PostgreSQL: each notification delivery (target, event, status, attempts, last result, time)
sent by the real delivery job over real HTTP, never a webhook's credentials, never another
account's; each withdrawal with who, when, amount, address, transaction and the step-up; and
page links that walk a list of every kind without losing or repeating a row."""

from __future__ import annotations

import csv
import io
import re
import secrets
from collections.abc import Iterator
from html import unescape

import httpx
import pytest

from conftest import FrozenClock, free_port
from notification_support import WebhookReceiver
from paysign.background import guarded_webhook_poster
from paysign.bootstrap import Runtime
from paysign.services import accounts, notifications
from paysign.services.notification_delivery import Notifier
from paysign.store import notification_repo, withdrawal_repo
from paysign.store.notification_repo import Target
from portal.conftest import signed_in

SANDBOX = "eip155:84532"
TX = "0x" + "cd" * 32
DESTINATION = "0x" + "44" * 20
CREDENTIALED = "https://user:pass@hooks.example.com/hook?token=SECRET"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as live:
        yield live


@pytest.fixture
def session(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> httpx.Client:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    signed_in(browser, holder, clock)
    return browser


def _deliver(runtime: Runtime) -> None:
    Notifier(
        runtime.db,
        runtime.vault,
        runtime.clock,
        post_webhook=guarded_webhook_poster(allow_private=True),
        smtp=None,
    ).run_once()


def _withdrawal(
    runtime: Runtime, account_id: str, *, verified_at: int, amount: int = 2_500_000
) -> None:
    """A withdrawal as the withdraw use case leaves it once the chain took it."""
    now = runtime.clock.now()
    with runtime.db.write() as conn:
        withdrawal_id = withdrawal_repo.record(
            conn,
            account_id=account_id,
            created_at=now,
            network=SANDBOX,
            sandbox=True,
            from_address="0x" + "11" * 20,
            to_address=DESTINATION,
            amount=amount,
            nonce=secrets.token_bytes(32),
            valid_before=now + 600,
            fresh_code=True,
            code_verified_at=verified_at,
        )
        withdrawal_repo.finish(conn, withdrawal_id, "sent", TX)


def _table(page: httpx.Response) -> str:
    found = re.search(r'<table id="activity".*?</table>', page.text, re.S)
    assert found, page.text
    return found.group(0)


def _decisions(page: httpx.Response) -> list[str]:
    return re.findall(r'<td data-label="Decision">([a-z]+)</td>', page.text)


def _link(page: httpx.Response, name: str) -> str | None:
    found = re.search(rf'<a id="{name}" href="([^"]+)"', page.text)
    return unescape(found.group(1)) if found else None


def _export(session: httpx.Client, **params: str) -> tuple[str, list[dict[str, str]]]:
    export = session.get("/portal/activity.csv", params=params)
    assert export.status_code == 200
    return export.text, list(csv.DictReader(io.StringIO(export.text)))


def test_deliveries_and_a_withdrawal_on_the_page_and_in_the_export_without_credentials(
    session: httpx.Client,
    runtime: Runtime,
    holder: accounts.CreatedAccount,
    receiver: WebhookReceiver,
) -> None:
    me, db, clock = holder.account_id, runtime.db, runtime.clock
    notifications.add_webhook(db, runtime.vault, clock, me, receiver.url + "?token=SECRET")
    closed = f"http://127.0.0.1:{free_port()}/hook?token=SECRET"
    notifications.add_webhook(db, runtime.vault, clock, me, closed)
    # A target stored before URLs with user info were refused: the job will not call it.
    credentialed_id = secrets.token_hex(8)
    sealed = runtime.vault.seal(
        notifications.webhook_context(credentialed_id), notifications.new_webhook_secret().encode()
    ).to_bytes()
    with db.write() as conn:
        notification_repo.add_target(
            conn, Target(credentialed_id, me, "webhook", CREDENTIALED, sealed, clock.now())
        )
    stranger = accounts.create_account(
        db, runtime.vault, clock, email="stranger@example.com", password="x" * 20
    )
    notifications.add_webhook(
        db, runtime.vault, clock, stranger.account_id, receiver.url + "/stranger?token=THEIRS"
    )
    assert notifications.send_test(db, clock, me)
    assert notifications.send_test(db, clock, stranger.account_id)
    _deliver(runtime)
    assert len(receiver.received) == 2  # mine and the stranger's; the others failed
    runtime.clock.advance(1)  # type: ignore[attr-defined]
    _withdrawal(runtime, me, verified_at=clock.now() - 1)

    page = session.get("/portal/activity")
    assert page.status_code == 200
    table = _table(page)
    for secret in ("SECRET", "THEIRS", "stranger"):
        assert secret not in page.text
    assert "pass" not in table  # the page's own words may say "password" elsewhere
    assert _decisions(page) == ["withdrawn", "delivery", "delivery", "delivery"]
    statuses = re.findall(r'<span class="delivery" data-status="([a-z]+)">', table)
    assert sorted(statuses) == ["delivered", "retrying", "retrying"]
    targets = re.findall(r'<span class="mono target">([^<]*)</span>', table)
    assert sorted(targets) == sorted(
        [
            receiver.url,
            closed.partition("?")[0],
            "https://hooks.example.com/hook",
        ]
    )
    assert table.count('<span class="mono event">test</span>') == 3
    assert '1 attempt; last: <span class="last-result">calling http://127.0.0.1:' in table
    # The withdrawal: who, when, how much, where, which transaction, and the step-up.
    assert f'by <span class="by">{holder.email}</span>' in table
    assert "confirmed with a fresh authenticator code (code verified <time" in table
    assert DESTINATION in table and f'title="{TX}"' in table and ">2.5<" in table

    only = session.get("/portal/activity", params={"decision": "delivery"})
    assert _decisions(only) == ["delivery"] * 3
    assert 'value="delivery" selected' in only.text

    text, rows = _export(session)
    for secret in ("SECRET", "pass", "THEIRS", "stranger"):
        assert secret not in text
    withdrawn, *deliveries = rows
    assert (withdrawn["decision"], withdrawn["by"], withdrawn["step_up"]) == (
        "withdrawn",
        holder.email,
        "authenticator code",
    )
    assert withdrawn["step_up_utc"] == "2026-09-21T14:13:20Z"
    assert withdrawn["time_utc"] == "2026-09-21T14:13:21Z"
    assert (withdrawn["amount_usdc"], withdrawn["pay_to"], withdrawn["transaction"]) == (
        "2.500000",
        DESTINATION,
        TX,
    )
    by_target = {row["target"]: row for row in deliveries}
    delivered = by_target[receiver.url]
    assert (delivered["status"], delivered["attempts"], delivered["event"]) == (
        "delivered",
        "1",
        "test",
    )
    assert (delivered["last_result"], delivered["time_utc"]) == ("", "2026-09-21T14:13:20Z")
    unreachable = by_target[closed.partition("?")[0]]
    assert (unreachable["status"], unreachable["attempts"]) == ("retrying", "1")
    assert unreachable["last_result"].startswith(f"calling {closed.partition('?')[0]} failed")
    refused = by_target["https://hooks.example.com/hook"]
    assert refused["last_result"] == "URLs with credentials in them are not called"
    _, only_rows = _export(session, decision="delivery")
    assert {row["decision"] for row in only_rows} == {"delivery"} and len(only_rows) == 3


def _rows(page: httpx.Response) -> list[str]:
    return re.findall(r"<tr><td data-label=\"Time\">.*?</tr>", _table(page), re.S)


def test_page_links_walk_a_list_of_every_kind_without_losing_or_repeating_a_row(
    session: httpx.Client,
    runtime: Runtime,
    holder: accounts.CreatedAccount,
    receiver: WebhookReceiver,
) -> None:
    me, db, clock = holder.account_id, runtime.db, runtime.clock
    for name in ("a", "b", "c"):
        notifications.add_webhook(db, runtime.vault, clock, me, f"{receiver.url}/{name}")
    seconds = 12  # 3 deliveries and 2 withdrawals in each: 60 rows, more than a page of 50
    for second in range(seconds):
        with db.write() as conn:  # an event to each target; tests are limited to one a minute
            notification_repo.queue_event(conn, me, "test", detail="a test", now=clock.now())
        _deliver(runtime)
        _withdrawal(runtime, me, verified_at=clock.now(), amount=2 * second + 1)
        _withdrawal(runtime, me, verified_at=clock.now(), amount=2 * second + 2)
        runtime.clock.advance(1)  # type: ignore[attr-defined]

    first = session.get("/portal/activity")
    pages = [_rows(first)]
    older = _link(first, "older")
    while older is not None:
        page = session.get(older)
        pages.append(_rows(page))
        older = _link(page, "older")
    assert [len(rows) for rows in pages] == [50, 10]
    walked = [row for rows in pages for row in rows]
    # Each row differs from every other (its second, its target or its amount).
    assert len(set(walked)) == len(walked) == seconds * 5
    assert sum('data-label="Decision">delivery<' in row for row in walked) == seconds * 3
    newer = _link(page, "newer")
    assert newer is not None and _rows(session.get(newer)) == pages[0]
