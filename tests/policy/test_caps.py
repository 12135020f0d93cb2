"""Spend-cap windows: UTC days and UTC calendar months, half-open [start, resets_at)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paysign.policy.caps import DAY, USDC, Caps, day_window, iso, month_window, windows_at


def ts(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def test_defaults_are_1_10_100_usdc() -> None:
    assert Caps.defaults() == Caps(per_payment=1_000_000, daily=10_000_000, monthly=100_000_000)
    assert USDC == 1_000_000


def test_limit_of() -> None:
    caps = Caps(per_payment=1, daily=2, monthly=None)
    assert caps.limit_of("daily") == 2
    assert caps.limit_of("monthly") is None
    with pytest.raises(KeyError):
        caps.limit_of("perPayment")


@pytest.mark.parametrize(
    ("now", "start", "resets_at"),
    [
        ("2026-09-21 00:00:00", "2026-09-21 00:00:00", "2026-09-22 00:00:00"),
        ("2026-09-21 12:34:56", "2026-09-21 00:00:00", "2026-09-22 00:00:00"),
        ("2026-09-21 23:59:59", "2026-09-21 00:00:00", "2026-09-22 00:00:00"),
        ("2026-09-30 23:59:59", "2026-09-30 00:00:00", "2026-10-01 00:00:00"),
        ("2026-12-31 23:59:59", "2026-12-31 00:00:00", "2027-01-01 00:00:00"),
        ("2028-02-28 10:00:00", "2028-02-28 00:00:00", "2028-02-29 00:00:00"),
        ("2028-02-29 10:00:00", "2028-02-29 00:00:00", "2028-03-01 00:00:00"),
        ("1970-01-01 00:00:00", "1970-01-01 00:00:00", "1970-01-02 00:00:00"),
    ],
)
def test_day_window(now: str, start: str, resets_at: str) -> None:
    window = day_window(ts(now))
    assert (window.name, window.start, window.resets_at) == ("daily", ts(start), ts(resets_at))


def test_day_boundary() -> None:
    midnight = ts("2026-09-22 00:00:00")
    assert day_window(midnight - 1).resets_at == midnight
    assert day_window(midnight).start == midnight
    assert day_window(midnight - 1) != day_window(midnight)


@pytest.mark.parametrize(
    ("now", "start", "resets_at"),
    [
        ("2026-09-01 00:00:00", "2026-09-01 00:00:00", "2026-10-01 00:00:00"),
        ("2026-09-16 05:00:00", "2026-09-01 00:00:00", "2026-10-01 00:00:00"),
        ("2026-09-30 23:59:59", "2026-09-01 00:00:00", "2026-10-01 00:00:00"),
        ("2026-01-31 23:59:59", "2026-01-01 00:00:00", "2026-02-01 00:00:00"),
        # December → January
        ("2026-12-01 00:00:00", "2026-12-01 00:00:00", "2027-01-01 00:00:00"),
        ("2026-12-31 23:59:59", "2026-12-01 00:00:00", "2027-01-01 00:00:00"),
        ("2027-01-01 00:00:00", "2027-01-01 00:00:00", "2027-02-01 00:00:00"),
        # February, leap and not
        ("2026-02-28 23:59:59", "2026-02-01 00:00:00", "2026-03-01 00:00:00"),
        ("2028-02-29 12:00:00", "2028-02-01 00:00:00", "2028-03-01 00:00:00"),
        ("2028-02-29 23:59:59", "2028-02-01 00:00:00", "2028-03-01 00:00:00"),
        ("2028-03-01 00:00:00", "2028-03-01 00:00:00", "2028-04-01 00:00:00"),
        ("2100-02-28 00:00:00", "2100-02-01 00:00:00", "2100-03-01 00:00:00"),  # not leap
        ("2000-02-29 00:00:00", "2000-02-01 00:00:00", "2000-03-01 00:00:00"),  # leap
    ],
)
def test_month_window(now: str, start: str, resets_at: str) -> None:
    window = month_window(ts(now))
    assert (window.name, window.start, window.resets_at) == ("monthly", ts(start), ts(resets_at))


def test_month_lengths() -> None:
    lengths = [
        month_window(ts(f"2028-{m:02d}-15 00:00:00")).resets_at
        - month_window(ts(f"2028-{m:02d}-15 00:00:00")).start
        for m in range(1, 13)
    ]
    assert [n // DAY for n in lengths] == [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def test_windows_at() -> None:
    now = ts("2026-12-31 23:59:59")
    assert windows_at(now) == (day_window(now), month_window(now))
    assert [w.name for w in windows_at(now)] == ["daily", "monthly"]


def test_iso() -> None:
    assert iso(ts("2027-01-01 00:00:00")) == "2027-01-01T00:00:00Z"
    assert iso(month_window(ts("2028-02-29 23:59:59")).resets_at) == "2028-03-01T00:00:00Z"
    assert iso(day_window(1_790_000_000).resets_at) == "2026-09-22T00:00:00Z"


NOW = st.integers(0, ts("2200-01-01 00:00:00"))


@given(NOW)
def test_windows_contain_now_and_meet_their_successor(now: int) -> None:
    for window in windows_at(now):
        assert window.start <= now < window.resets_at
        following = day_window if window.name == "daily" else month_window
        assert following(window.resets_at).start == window.resets_at
        assert following(window.resets_at - 1) == window
        assert following(window.start) == window
    day, month = windows_at(now)
    assert month.start <= day.start and day.resets_at <= month.resets_at
    assert day.start % DAY == 0 and month.start % DAY == 0
    assert datetime.fromtimestamp(month.start, tz=UTC).day == 1
    assert 28 * DAY <= month.resets_at - month.start <= 31 * DAY
