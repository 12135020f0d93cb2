"""bench/summary.py: the scale-out summary's arithmetic and its goal checks."""

from __future__ import annotations

import doctest
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
X = "\N{MULTIPLICATION SIGN}"


@pytest.fixture(scope="module")
def summary() -> ModuleType:
    # Under pytest, tests/bench is the package `bench`: the benchmark's module is loaded from
    # its file instead.
    spec = importlib.util.spec_from_file_location("bench_summary", BENCH / "summary.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _runs(summary: ModuleType, **overrides: object) -> dict[str, object]:
    m = summary.Measured
    runs = {
        "ceiling": m(rps=14_600, p99_us=5_000, lone_p50_us=250),
        "sqlite": m(rps=9_300, p99_us=7_200, lone_p50_us=650),  # adds 400 µs
        "postgres": m(rps=6_700, p99_us=9_800, lone_p50_us=1_050),  # adds 800 µs
        "postgres-2": m(rps=7_400, p99_us=9_900, lone_p50_us=1_100),
    }
    runs.update(overrides)
    return runs


def _verdicts(summary: ModuleType, runs: dict[str, object]) -> dict[str, bool]:
    return {c.goal: c.ok for c in summary.goal_checks(runs, 2, 32)}


def test_its_examples_hold(summary: ModuleType) -> None:
    assert doctest.testmod(summary).failed == 0


def test_each_row_is_a_share_of_the_row_it_scales(summary: ModuleType) -> None:
    rows = summary.summary_rows(_runs(summary), 2)
    assert [(r.label, r.rps, r.share, r.p99) for r in rows] == [
        ("bare Starlette (ceiling)", "14.6k", "100%", "—"),
        ("paysign, SQLite (embedded default)", "9.3k", "64% of ceiling", "7.2 ms"),
        ("paysign, PostgreSQL", "6.7k", "72% of SQLite", "9.8 ms"),
        ("two `serve` processes on one PostgreSQL", "7.4k", f"1.10{X} one", "9.9 ms"),
    ]


def test_a_run_meeting_every_goal_passes_them_all(summary: ModuleType) -> None:
    runs = _runs(summary)
    assert summary.lone_added_us(runs) == {"sqlite": 400, "postgres": 800, "postgres-2": 850}
    assert summary.lone_ratio(runs) == 2.0
    verdicts = _verdicts(summary, runs)
    assert len(verdicts) == 6
    assert all(verdicts.values()), verdicts


@pytest.mark.parametrize(
    ("server", "change", "failed_goal"),
    [
        ("postgres", {"rps": 6_400}, "PostgreSQL ≥ 70% of the SQLite throughput"),
        ("postgres", {"p99_us": 10_100}, "p99 ≤ 10.0 ms at 32 connections on both databases"),
        ("sqlite", {"p99_us": 10_100}, "p99 ≤ 10.0 ms at 32 connections on both databases"),
        (
            "postgres",
            {"lone_p50_us": 1_060},
            f"a lone request on PostgreSQL adds ≤ 2{X} what it adds on SQLite",
        ),
        ("postgres-2", {"rps": 7_300}, f"two `serve` processes on one PostgreSQL ≥ 1.1{X} one"),
        (
            "ceiling",
            {"rps": 17_000},
            "SQLite (durable) ≥ 55% of the bare Starlette ceiling",
        ),
        ("postgres-2", {"non2xx": 1}, "0 failed requests (non-2xx)"),
    ],
)
def test_each_goal_fails_alone_just_past_its_limit(
    summary: ModuleType, server: str, change: dict[str, float], failed_goal: str
) -> None:
    runs = _runs(summary)
    m = runs[server]
    runs[server] = summary.Measured(**{**m.__dict__, **change})
    verdicts = _verdicts(summary, runs)
    assert [goal for goal, ok in verdicts.items() if not ok] == [failed_goal]


def test_failed_requests_of_the_ceiling_are_not_ours(summary: ModuleType) -> None:
    runs = _runs(summary, ceiling=summary.Measured(14_600, 5_000, 250, non2xx=3))
    assert all(_verdicts(summary, runs).values())


def test_without_postgresql_only_the_sqlite_goals_are_checked(summary: ModuleType) -> None:
    runs = _runs(summary)
    del runs["postgres"], runs["postgres-2"]
    assert [r.label for r in summary.summary_rows(runs, 2)] == [
        "bare Starlette (ceiling)",
        "paysign, SQLite (embedded default)",
    ]
    assert summary.lone_ratio(runs) is None
    assert list(_verdicts(summary, runs)) == [
        "p99 ≤ 10.0 ms at 32 connections on SQLite",
        "SQLite (durable) ≥ 55% of the bare Starlette ceiling",
        "0 failed requests (non-2xx)",
    ]


def test_a_lone_request_no_slower_than_the_ceiling_on_sqlite_is_not_divided_by(
    summary: ModuleType,
) -> None:
    runs = _runs(summary, sqlite=summary.Measured(9_300, 7_200, lone_p50_us=240))
    assert summary.lone_ratio(runs) == float("inf")
    assert not _verdicts(summary, runs)[
        f"a lone request on PostgreSQL adds ≤ 2{X} what it adds on SQLite"
    ]


def test_the_markdown_has_the_three_tables(summary: ModuleType) -> None:
    runs = _runs(summary, **{"sqlite-2": summary.Measured(9_800, 8_000, 700)})
    text = summary.summary_markdown(runs, 2, 32)
    assert f"| two `serve` processes on one SQLite file | 9.8k | 1.05{X} one | 8.0 ms |" in text
    assert "| PostgreSQL | 1,050 µs | 800 µs |" in text
    assert f"PostgreSQL adds 2.00{X} what SQLite adds to a lone request." in text
    assert f"| two `serve` processes on one PostgreSQL ≥ 1.1{X} one | 1.10{X} | ✅ |" in text
    assert "❌" not in text


def test_the_load_over_many_accounts_is_a_row_and_a_p99_check_of_its_own(
    summary: ModuleType,
) -> None:
    many = {
        "sqlite-16-accounts": summary.Measured(6_200, 9_000, 700),
        "postgres-16-accounts": summary.Measured(5_400, 10_100, 1_100),
    }
    runs = _runs(summary, **many)
    rows = [(r.label, r.rps, r.share, r.p99) for r in summary.summary_rows(runs, 2, 16)]
    assert rows[2] == (
        "paysign, SQLite, the load over 16 accounts",
        "6.2k",
        f"0.67{X} one account",
        "9.0 ms",
    )
    assert rows[4] == (
        "paysign, PostgreSQL, the load over 16 accounts",
        "5.4k",
        f"0.81{X} one account",
        "10.1 ms",
    )
    verdicts = {c.goal: c.ok for c in summary.goal_checks(runs, 2, 32, 16)}
    failed = [goal for goal, ok in verdicts.items() if not ok]
    assert failed == ["p99 ≤ 10.0 ms at 32 connections, the load over 16 accounts"]
    # Without the count, the rows over many accounts are not the summary's.
    assert len(summary.summary_rows(runs, 2)) == 4
    assert all(_verdicts(summary, runs).values())
