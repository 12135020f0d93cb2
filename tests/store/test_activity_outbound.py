"""Withdrawals and notification deliveries in the activity, on SQLite and PostgreSQL: who, when
and how a withdrawal was confirmed; each delivery's target (never a webhook's credentials),
event, status, attempts and last result; one account never sees another's; and paging with
the cursor across every kind of row loses and repeats nothing."""

from __future__ import annotations

import csv
import io
import secrets
from pathlib import Path

import pytest
from test_activity_repo import _account, _refused, _signed

from paysign.services.activity import all_rows, csv_chunks, entry_of, page_of
from paysign.store import activity_repo, notification_repo, withdrawal_repo
from paysign.store.activity_outbound import scrubbed, shown_url
from paysign.store.activity_repo import ActivityFilters, ActivityRow, Cursor
from paysign.store.database import Database
from paysign.store.migrate import migrate
from paysign.store.notification_repo import Target
from paysign.store.schema import accounts, notification_deliveries

T0 = 1_790_000_000
SANDBOX = "eip155:84532"
TX = "0x" + "ab" * 32
CREDENTIALED = "https://user:pass@hooks.example.com/hook?token=SECRET"


def _email(db: Database, account_id: str) -> str:
    with db.read() as conn:
        found = conn.execute(accounts.select().where(accounts.c.id == account_id)).one()
    return str(found.email)


def _target(db: Database, account_id: str, url: str, kind: str = "webhook") -> str:
    target_id = secrets.token_hex(8)
    sealed = b"sealed" if kind == "webhook" else None
    with db.write() as conn:
        notification_repo.add_target(conn, Target(target_id, account_id, kind, url, sealed, T0))
    return target_id


def _event(
    db: Database, account_id: str, at: int, *, host: str = "", path: str = "", amount: int = 0
) -> list[str]:
    """An event fanned out to every target of the account, as the delivery job does; the new
    deliveries' ids."""
    with db.write() as conn:
        before = {row.id for row in conn.execute(notification_deliveries.select())}
        notification_repo.queue_event(
            conn,
            account_id,
            "allow-pending" if host else "test",
            seller_host=host,
            seller_path=path,
            amount=amount,
            detail="waiting",
            now=at,
        )
        notification_repo.fan_out(conn, at)
        after = {row.id for row in conn.execute(notification_deliveries.select())}
    return sorted(after - before)


def _attempt(db: Database, delivery_id: str, at: int, error: str | None, retry: bool) -> None:
    with db.write() as conn:
        notification_repo.record_attempt(
            conn, delivery_id, now=at, error=error, retry_at=at + 60 if retry else None
        )


def _withdrawal(
    db: Database, account_id: str, at: int, *, verified_at: int | None = None, amount: int = 7
) -> int:
    with db.write() as conn:
        withdrawal_id = withdrawal_repo.record(
            conn,
            account_id=account_id,
            created_at=at,
            network=SANDBOX,
            sandbox=True,
            from_address="0x" + "11" * 20,
            to_address="0x" + "33" * 20,
            amount=amount,
            nonce=secrets.token_bytes(32),
            valid_before=at + 600,
            fresh_code=True,
            code_verified_at=verified_at,
        )
        withdrawal_repo.finish(conn, withdrawal_id, "sent", TX)
    return withdrawal_id


def _page(db: Database, account_id: str, **filters: object) -> list[ActivityRow]:
    with db.read() as conn:
        return activity_repo.page(conn, account_id, ActivityFilters(**filters), limit=1_000)  # type: ignore[arg-type]


def _csv(db: Database, account_id: str) -> list[dict[str, str]]:
    text = "".join(csv_chunks(all_rows(db, account_id, ActivityFilters())))
    return list(csv.DictReader(io.StringIO(text)))


def test_a_delivery_shows_its_target_event_status_attempts_and_last_result(
    db: Database,
) -> None:
    me = _account(db)
    hook = _target(db, me, CREDENTIALED)
    _target(db, me, "holder@example.com", kind="email")
    deliveries = _event(db, me, T0, host="api.example.com", path="/v1", amount=10_000)
    assert len(deliveries) == 2
    with db.read() as conn:
        by_target = {
            row.target_id: row.id
            for row in conn.execute(notification_deliveries.select())
            if row.id in deliveries
        }
    # What the outbound client says of a failed call quotes the URL, credentials and all.
    error = f"calling {CREDENTIALED} failed: ConnectError: SECRET refused for user:pass"
    _attempt(db, by_target[hook], T0 + 5, error, retry=True)
    [email_delivery] = [d for d in deliveries if d != by_target[hook]]
    _attempt(db, email_delivery, T0 + 6, None, retry=False)

    rows = _page(db, me)
    assert [row.kind for row in rows] == ["delivery", "delivery"]
    shown = {row.target_kind: row for row in rows}
    webhook, email = shown["webhook"], shown["email"]
    assert webhook.target == "https://hooks.example.com/hook"
    assert email.target == "holder@example.com"
    assert (webhook.event, webhook.attempts, webhook.seller) == (
        "allow-pending",
        1,
        "api.example.com/v1",
    )
    assert (
        webhook.last_error
        == "calling https://hooks.example.com/hook failed: ConnectError: … refused for …"
    )
    assert "pass" not in repr(rows) and "SECRET" not in repr(rows)

    entry = entry_of(webhook)
    assert entry["decision"] == "delivery" and entry["status"] == "retrying"
    assert entry["nextAttemptAt"] == "2026-09-21T14:14:25Z"
    assert entry_of(email)["status"] == "delivered"
    assert entry_of(email)["deliveredAt"] == "2026-09-21T14:13:26Z"
    assert (entry_of(email)["attempts"], entry_of(email)["lastResult"]) == (1, None)

    table = _csv(db, me)
    text = repr(table)
    assert "pass" not in text and "SECRET" not in text
    cells = {row["target"]: row for row in table}
    failed = cells["https://hooks.example.com/hook"]
    assert (failed["decision"], failed["status"], failed["attempts"]) == (
        "delivery",
        "retrying",
        "1",
    )
    assert (failed["event"], failed["seller"], failed["amount_usdc"]) == (
        "allow-pending",
        "api.example.com/v1",
        "0.010000",
    )
    assert failed["last_result"].startswith("calling https://hooks.example.com/hook failed")
    assert failed["time_utc"] == "2026-09-21T14:13:20Z"
    assert (failed["network"], failed["sandbox"]) == ("", "")
    assert cells["holder@example.com"]["status"] == "delivered"


def test_a_delivery_that_gave_up_is_failed_and_a_test_event_has_no_amount(db: Database) -> None:
    me = _account(db)
    _target(db, me, "https://hooks.example.com/h")
    [delivery] = _event(db, me, T0)
    [waiting] = _page(db, me)
    assert entry_of(waiting)["status"] == "pending"
    _attempt(db, delivery, T0 + 1, "the webhook answered HTTP 500", retry=False)
    [row] = _csv(db, me)
    assert (row["status"], row["last_result"], row["event"]) == (
        "failed",
        "the webhook answered HTTP 500",
        "test",
    )
    assert row["amount_usdc"] == "" and row["seller"] == ""


def test_an_account_never_sees_another_accounts_deliveries(db: Database) -> None:
    me, stranger = _account(db), _account(db)
    _target(db, me, "https://mine.example.com/h")
    _target(db, stranger, "https://theirs.example.com/h?token=THEIRS")
    _event(db, me, T0, host="api.example.com", path="/v1")
    _event(db, stranger, T0, host="api.example.com", path="/v1")
    _event(db, stranger, T0 + 1)
    mine, theirs = _page(db, me), _page(db, stranger)
    assert [row.target for row in mine] == ["https://mine.example.com/h"]
    assert [row.target for row in theirs] == ["https://theirs.example.com/h"] * 2
    assert "theirs" not in repr(_csv(db, me))
    # Paging from any position stays within the account.
    with db.read() as conn:
        after = activity_repo.page(
            conn, me, ActivityFilters(), limit=10, before=Cursor(T0 + 10, "delivery", 0, "x")
        )
    assert [row.target for row in after] == ["https://mine.example.com/h"]


def test_a_withdrawal_says_who_when_how_much_where_which_transaction_and_the_step_up(
    db: Database,
) -> None:
    me = _account(db)
    _withdrawal(db, me, T0 + 2, verified_at=T0 + 1, amount=1_500_000)
    _withdrawal(db, me, T0, verified_at=None)  # recorded before the time was kept
    newest, older = _page(db, me)
    assert newest.kind == "withdrawn" and newest.by == _email(db, me)
    assert (newest.amount, newest.pay_to, newest.settled_tx) == (1_500_000, "0x" + "33" * 20, TX)
    entry = entry_of(newest)
    assert entry["at"] == "2026-09-21T14:13:22Z"
    assert entry["stepUp"] == "authenticator code"
    assert entry["stepUpAt"] == "2026-09-21T14:13:21Z"
    assert entry["detail"] == "confirmed with a fresh authenticator code"
    assert entry_of(older)["stepUpAt"] is None

    first, second = _csv(db, me)
    assert first["by"] == _email(db, me)
    assert (first["step_up"], first["step_up_utc"]) == (
        "authenticator code",
        "2026-09-21T14:13:21Z",
    )
    assert (first["amount_usdc"], first["pay_to"], first["transaction"]) == (
        "1.500000",
        "0x" + "33" * 20,
        TX,
    )
    assert (second["step_up"], second["step_up_utc"]) == ("authenticator code", "")
    assert first["target"] == first["event"] == first["attempts"] == first["last_result"] == ""


def _everything(db: Database) -> tuple[str, list[ActivityRow]]:
    """An account with every kind of row, many sharing a second, two deliveries per event."""
    me = _account(db)
    _target(db, me, "https://a.example.com/h")
    _target(db, me, "b@example.com", kind="email")
    for i in range(17):
        at = T0 + i // 3
        _signed(db, me, at, path=f"/s{i}")
        if i % 2 == 0:
            _refused(db, me, at, path=f"/r{i}")
        if i % 3 == 0:
            _withdrawal(db, me, at, verified_at=at)
        if i % 4 == 0:
            _event(db, me, at, host="api.example.com", path=f"/e{i}")
    return me, _page(db, me)


def test_paging_across_every_kind_covers_each_row_once_in_both_directions(db: Database) -> None:
    me, everything = _everything(db)
    kinds = [row.kind for row in everything]
    assert kinds.count("delivery") == 10 and kinds.count("withdrawn") == 6
    assert len(everything) == 17 + 9 + 6 + 10
    assert len({row.cursor for row in everything}) == len(everything)
    # Newest first; within a second deliveries, withdrawals, refusals, then signatures.
    order = {"delivery": 0, "withdrawn": 1, "refused": 2, "signed": 3}
    assert [(-r.created_at, order[r.kind]) for r in everything] == sorted(
        (-r.created_at, order[r.kind]) for r in everything
    )
    with db.read() as conn:
        for size in (1, 3, 7):
            pages, before = [], None
            while rows := activity_repo.page(
                conn, me, ActivityFilters(), limit=size, before=before
            ):
                pages += rows
                before = Cursor.parse(rows[-1].cursor.token())  # as a page link carries it
            assert pages == everything
            back: list[ActivityRow] = []
            after = everything[-1].cursor
            while rows := activity_repo.page(conn, me, ActivityFilters(), limit=size, after=after):
                back = rows + back
                after = Cursor.parse(rows[0].cursor.token())
            assert back == everything[:-1]
    walked, cursor = [], None
    while True:
        found = page_of(db, me, ActivityFilters(), size=4, before=cursor)
        walked += found.rows
        if found.older is None:
            break
        cursor = found.older
    assert walked == everything


def test_the_kind_filter_and_the_others_on_deliveries(db: Database) -> None:
    me, everything = _everything(db)

    def kinds(**filters: object) -> set[str]:
        return {row.kind for row in _page(db, me, **filters)}

    deliveries = _page(db, me, decision="delivery")
    assert deliveries == [row for row in everything if row.kind == "delivery"]
    assert kinds(decision="signed") == {"signed"}
    assert kinds(decision="withdrawn") == {"withdrawn"}
    assert kinds(decision="refused") == {"refused"}
    # A delivery is on no network and has no settlement status.
    assert kinds(status="signed") == {"signed"}
    assert _page(db, me, decision="delivery", status="signed") == []
    assert "delivery" not in kinds(network=SANDBOX) | kinds(sandbox=True) | kinds(sandbox=False)
    # The seller filter matches a delivery's event's seller.
    assert kinds(seller_contains="/e8") == {"delivery"}
    assert len(_page(db, me, seller_contains="/e8")) == 2
    assert kinds(seller_contains="/s4") == {"signed"}
    assert {r.created_at for r in _page(db, me, decision="delivery", since=T0 + 2)} == {
        T0 + 2,
        T0 + 4,
        T0 + 5,
    }
    assert {r.created_at for r in _page(db, me, decision="delivery", until=T0 + 1)} == {T0}


@pytest.mark.parametrize(
    "token", ["1-d-1", "1-d-1-", "1-d-x-msg_a", "1-d-1-msg!", "1-d-1-" + "a" * 41, "1-w-1-msg_a"]
)
def test_a_delivery_cursor_token_is_checked(token: str) -> None:
    with pytest.raises(ValueError, match="not a position"):
        Cursor.parse(token)


def test_a_delivery_cursor_token_round_trips() -> None:
    cursor = Cursor(T0, "delivery", 42, "msg_a-B_c")
    assert cursor.token() == f"{T0}-d-42-msg_a-B_c"
    assert Cursor.parse(cursor.token()) == cursor


def test_the_outbound_branches_keep_to_their_account_index_on_sqlite(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'plan.db'}")
    migrate(database)
    try:
        cursor = Cursor(T0, "delivery", 5, "msg_x")
        query = activity_repo._query("a", ActivityFilters(), cursor, True, 51)
        assert query is not None
        with database.read() as conn:
            compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
            plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}").all()
        details = " | ".join(str(row[-1]) for row in plan)
        assert "ix_notification_deliveries_account_created" in details
        assert "ix_withdrawals_account" in details
        assert "SCAN notification_deliveries" not in details
        assert "SCAN withdrawals" not in details
    finally:
        database.dispose()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (CREDENTIALED, "https://hooks.example.com/hook"),
        ("http://127.0.0.1:9/h#frag", "http://127.0.0.1:9/h"),
        # A token in the path (Slack's, Discord's): a long segment is elided.
        (
            "https://hooks.slack.com/services/T0001/B0001/aXbYcZ1234567890dEfGhIjK",
            "https://hooks.slack.com/services/T0001/B0001/…",
        ),
    ],
)
def test_a_webhook_url_is_shown_without_its_credentials(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_an_error_quoting_the_url_loses_its_credentials_however_written() -> None:
    url = "https://hooks.example.com/hook?token=S%2BECRET&x=1"
    text = scrubbed(
        f"calling {url!r} failed; then {url.upper()} and S+ECRET and S%2BECRET again", url
    )
    assert "ECRET" not in text
    assert "'https://hooks.example.com/hook'" in text


def test_the_new_export_cells_are_guarded_against_formulas(db: Database) -> None:
    """A target, an event's seller and an error come from outside: a leading ``= + - @`` is
    quoted so a spreadsheet shows it instead of running it."""
    me = _account(db)
    _target(db, me, "=HYPERLINK(1)@example.com", kind="email")
    [delivery] = _event(db, me, T0, host="-2+3.example.com", path="/x")
    _attempt(db, delivery, T0, "@SUM(1) refused the message", retry=False)
    [row] = _csv(db, me)
    assert row["target"] == "'=HYPERLINK(1)@example.com"
    assert row["seller"] == "'-2+3.example.com/x"
    assert row["last_result"] == "'@SUM(1) refused the message"
