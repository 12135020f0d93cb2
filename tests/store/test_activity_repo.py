"""The activity query: one list of signatures and refusals, filtered and paged by the database,
on SQLite and PostgreSQL alike."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import sqlalchemy as sa

from paysign.services.activity import all_rows, csv_chunks, page_of
from paysign.store import activity_repo
from paysign.store.activity_repo import ActivityFilters, Cursor
from paysign.store.database import Database
from paysign.store.migrate import migrate
from paysign.store.schema import accounts, pending_sellers, refusals, signatures

T0 = 1_790_000_000


def _account(db: Database) -> str:
    account_id = secrets.token_hex(8)
    with db.write() as conn:
        conn.execute(
            accounts.insert().values(
                id=account_id,
                email=f"{account_id}@example.com",
                password_hash="h",
                sealed_totp_secret=b"s",
                created_at=T0,
            )
        )
    return account_id


def _signed(
    db: Database,
    account_id: str,
    at: int,
    *,
    host: str = "api.example.com",
    path: str = "/v1",
    network: str = "eip155:84532",
    sandbox: bool = True,
    amount: int = 10_000,
) -> None:
    with db.write() as conn:
        conn.execute(
            signatures.insert().values(
                account_id=account_id,
                seller_host=host,
                seller_path=path,
                network=network,
                asset="0x" + "11" * 20,
                pay_to="0x" + "22" * 20,
                amount=amount,
                nonce=secrets.token_bytes(32),
                valid_before=at + 60,
                sandbox=sandbox,
                x402_version=2,
                created_at=at,
                tier="OPEN_ECOSYSTEM",
                rule=host,
            )
        )


def _refused(
    db: Database,
    account_id: str,
    at: int,
    *,
    host: str = "other.example.net",
    path: str = "/x",
    network: str = "eip155:8453",
    sandbox: bool = False,
    reason: str = "allow-pending",
) -> None:
    with db.write() as conn:
        conn.execute(
            refusals.insert().values(
                account_id=account_id,
                seller_host=host,
                seller_path=path,
                network=network,
                amount=5,
                sandbox=sandbox,
                reason=reason,
                rule="approval.openEcosystem",
                detail="waiting for approval",
                created_at=at,
            )
        )


def _key(row: activity_repo.ActivityRow) -> tuple[str, int, str]:
    return row.kind, row.created_at, row.seller


def test_one_list_newest_first_refusals_before_signatures_within_a_second(db: Database) -> None:
    me, other = _account(db), _account(db)
    _signed(db, me, T0, path="/a")
    _refused(db, me, T0)
    _signed(db, me, T0, path="/b")
    _signed(db, me, T0 + 5, path="/c")
    _refused(db, other, T0 + 9)  # never shown to ``me``
    with db.read() as conn:
        rows = activity_repo.page(conn, me, ActivityFilters(), limit=10)
    assert [_key(r) for r in rows] == [
        ("signed", T0 + 5, "api.example.com/c"),
        ("refused", T0, "other.example.net/x"),
        ("signed", T0, "api.example.com/b"),
        ("signed", T0, "api.example.com/a"),
    ]
    assert rows[0].nonce is not None and len(rows[0].nonce) == 32 and rows[0].status == "signed"
    assert rows[1].reason == "allow-pending" and rows[1].nonce is None and rows[1].tier is None


def test_keyset_pages_cover_every_row_once_in_both_directions(db: Database) -> None:
    me = _account(db)
    # Ties on purpose: several rows of both kinds share a second (and ids overlap across tables).
    for i in range(23):
        _signed(db, me, T0 + i // 4, path=f"/s{i}")
        if i % 3 == 0:
            _refused(db, me, T0 + i // 4, path=f"/r{i}")
    with db.read() as conn:
        everything = activity_repo.page(conn, me, ActivityFilters(), limit=1000)
        assert len(everything) == 23 + 8
        pages, before = [], None
        while True:
            rows = activity_repo.page(conn, me, ActivityFilters(), limit=5, before=before)
            if not rows:
                break
            pages.append(rows)
            before = rows[-1].cursor
        assert [r for p in pages for r in p] == everything
        back, after = [], everything[-1].cursor
        while True:
            rows = activity_repo.page(conn, me, ActivityFilters(), limit=4, after=after)
            if not rows:
                break
            back = rows + back
            after = rows[0].cursor
        assert back == everything[:-1]


def test_filters_are_applied_by_the_query(db: Database) -> None:
    me = _account(db)
    _signed(db, me, T0, host="api.example.com", path="/weather", network="eip155:8453")
    _signed(db, me, T0 + 1, host="data.example.org", path="/100%_off", sandbox=False)
    _refused(db, me, T0 + 2, host="api.example.com", path="/Weather/Paris")
    _refused(db, me, T0 + 86_400, host="late.example.net")

    def sellers(**filters: object) -> list[str]:
        with db.read() as conn:
            rows = activity_repo.page(conn, me, ActivityFilters(**filters), limit=50)  # type: ignore[arg-type]
        return [r.seller for r in rows]

    assert sellers(decision="signed") == ["data.example.org/100%_off", "api.example.com/weather"]
    assert sellers(decision="refused") == ["late.example.net/x", "api.example.com/Weather/Paris"]
    # Contains, case-insensitive, over host and path together; % and _ are plain characters.
    assert sellers(seller_contains="WEATHER") == [
        "api.example.com/Weather/Paris",
        "api.example.com/weather",
    ]
    assert sellers(seller_contains="example.com/weather") == [
        "api.example.com/Weather/Paris",
        "api.example.com/weather",
    ]
    assert sellers(seller_contains="%_") == ["data.example.org/100%_off"]
    assert sellers(seller_contains="0_o") == []
    assert sellers(network="eip155:8453") == [
        "late.example.net/x",
        "api.example.com/Weather/Paris",
        "api.example.com/weather",
    ]
    assert sellers(sandbox=True) == ["api.example.com/weather"]
    assert sellers(sandbox=False, decision="signed") == ["data.example.org/100%_off"]
    assert sellers(since=T0 + 1, until=T0 + 3) == [
        "api.example.com/Weather/Paris",
        "data.example.org/100%_off",
    ]
    assert sellers(since=T0 + 86_400) == ["late.example.net/x"]


def test_page_of_says_where_older_and_newer_pages_start(db: Database) -> None:
    me = _account(db)
    for i in range(7):
        _signed(db, me, T0 + i, path=f"/{i}")
    first = page_of(db, me, ActivityFilters(), size=3)
    assert [r.seller_path for r in first.rows] == ["/6", "/5", "/4"]
    assert first.newer is None and first.older == first.rows[-1].cursor
    second = page_of(db, me, ActivityFilters(), size=3, before=first.older)
    assert [r.seller_path for r in second.rows] == ["/3", "/2", "/1"]
    assert second.newer is not None and second.older is not None
    last = page_of(db, me, ActivityFilters(), size=3, before=second.older)
    assert [r.seller_path for r in last.rows] == ["/0"] and last.older is None
    back = page_of(db, me, ActivityFilters(), size=3, after=last.newer)
    assert back == second
    # Paging back to the newest rows shows the whole first page, not a short one.
    assert page_of(db, me, ActivityFilters(), size=3, after=second.newer) == first
    assert page_of(db, me, ActivityFilters(decision="refused"), size=3).rows == []


def test_export_reads_every_row_in_batches_as_guarded_csv(db: Database) -> None:
    me = _account(db)
    for i in range(5):
        _signed(db, me, T0 + i, path=f"/{i}", amount=1_500_000)
    _refused(db, me, T0 + 10, host="evil.example", path="/=cmd")
    batches = list(all_rows(db, me, ActivityFilters(), batch=2))
    assert [len(b) for b in batches] == [2, 2, 2]
    text = "".join(csv_chunks(iter(batches)))
    lines = text.split("\r\n")
    assert lines[0].startswith("time_utc,decision,seller,amount_usdc")
    assert len(lines) == 1 + 6 + 1 and lines[-1] == ""
    assert lines[1].startswith("2026-09-21T") and ",refused,evil.example/=cmd,0.000005," in lines[1]
    # A signature not yet reconciled is awaiting settlement; no transaction yet.
    assert ",signed,api.example.com/4,1.500000,eip155:84532,true,awaiting,," in lines[2]
    assert lines[2].split(",")[10:12] == ["0x" + "22" * 20, ""]  # pay_to, transaction
    assert list(all_rows(db, me, ActivityFilters(network="nowhere"))) == []


def test_seen_sellers_are_distinct_host_filtered_and_include_pending(db: Database) -> None:
    me = _account(db)
    for _ in range(3):
        _signed(db, me, T0, host="api.example.com", path="/v1")
    _refused(db, me, T0, host="a.b.example.com:8443", path="/x")
    _refused(db, me, T0, host="unrelated.test", path="/")
    with db.write() as conn:
        conn.execute(
            pending_sellers.insert().values(
                account_id=me,
                host="new.example.com",
                path="/q",
                first_seen=T0,
                last_seen=T0,
                refused_count=1,
            )
        )
    with db.read() as conn:
        seen = activity_repo.seen_sellers(conn, me, "example.com", scan=100, limit=10)
        assert seen == [
            ("a.b.example.com:8443", "/x"),
            ("api.example.com", "/v1"),
            ("new.example.com", "/q"),
        ]
        # Only the newest ``scan`` rows of each table are looked at.
        assert activity_repo.seen_sellers(conn, me, "%", scan=100, limit=10) == []
        assert len(activity_repo.seen_sellers(conn, me, "", scan=1, limit=10)) == 3


@pytest.mark.parametrize(
    "token", ["", "1-x-2", "1-s-", "a-s-1", "1-s-1-2", "\uff11-s-1", "9" * 19 + "-s-1", "-1-s-1"]
)
def test_a_cursor_token_is_checked(token: str) -> None:
    with pytest.raises(ValueError, match="not a position"):
        Cursor.parse(token)


def test_the_query_keeps_to_the_account_index_on_sqlite(tmp_path: Path) -> None:
    """A page reads through (account_id, created_at) on both tables, not a table scan."""
    database = Database(f"sqlite:///{tmp_path / 'plan.db'}")
    migrate(database)
    try:
        query = activity_repo._query("a", ActivityFilters(), Cursor(T0, "signed", 5), True, 51)
        assert query is not None
        with database.read() as conn:
            compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
            plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}").all()
        details = " | ".join(str(row[-1]) for row in plan)
        assert "ix_signatures_account_created" in details
        assert "ix_refusals_account_created" in details
        assert "SCAN signatures" not in details and "SCAN refusals" not in details
    finally:
        database.dispose()


def test_nothing_for_an_unknown_account(db: Database) -> None:
    with db.read() as conn:
        assert activity_repo.page(conn, "nobody", ActivityFilters(), limit=5) == []
        count = conn.execute(sa.select(sa.func.count()).select_from(signatures)).scalar_one()
    assert count == 0
