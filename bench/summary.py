"""The scale-out summary: throughput by database and process count, lone-request cost, goals.

It imports nothing from the rest of ``bench``: tests load it from its file.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The goals, as fractions and limits.
POSTGRES_OF_SQLITE = 0.70
P99_LIMIT_US = 10_000
LONE_POSTGRES_OVER_SQLITE = 2.0
TWO_PROCESSES_OVER_ONE = 1.1
SQLITE_OF_CEILING = 0.55

_COUNT_WORDS = {2: "two", 3: "three", 4: "four"}
TIMES = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True)
class Measured:
    """One server's medians over the timed rounds, and its lone-request p50."""

    rps: float
    p99_us: float
    lone_p50_us: float
    non2xx: int = 0


@dataclass(frozen=True)
class Row:
    label: str
    rps: str
    share: str
    p99: str


@dataclass(frozen=True)
class Check:
    goal: str
    measured: str
    ok: bool


def multi_name(database: str, workers: int) -> str:
    """The target of ``workers`` ``serve`` processes on ``database``: ``postgres-2``."""
    return f"{database}-{workers}"


def many_name(database: str, accounts: int) -> str:
    """The target of one ``serve`` on ``database`` with the load over ``accounts`` accounts:
    ``sqlite-16-accounts``."""
    return f"{database}-{accounts}-accounts"


def _processes(workers: int) -> str:
    return f"{_COUNT_WORDS.get(workers, str(workers))} `serve` processes"


def _k(rps: float) -> str:
    return f"{rps / 1000:.1f}k"


def _ms(us: float) -> str:
    return f"{us / 1000:.1f} ms"


def summary_rows(runs: dict[str, Measured], workers: int, accounts: int = 0) -> list[Row]:
    """The table's rows, for the servers that ran (the ceiling and SQLite always do); with
    ``accounts``, each database's row over that many accounts follows it.

    >>> runs = {"ceiling": Measured(14_600, 5_000, 250), "sqlite": Measured(9_300, 7_200, 900)}
    >>> [(r.rps, r.share, r.p99) for r in summary_rows(runs, 2)]
    [('14.6k', '100%', '—'), ('9.3k', '64% of ceiling', '7.2 ms')]
    """
    ceiling, sqlite = runs["ceiling"], runs["sqlite"]
    rows = [
        Row("bare Starlette (ceiling)", _k(ceiling.rps), "100%", "—"),
        Row(
            "paysign, SQLite (embedded default)",
            _k(sqlite.rps),
            f"{sqlite.rps / ceiling.rps:.0%} of ceiling",
            _ms(sqlite.p99_us),
        ),
    ]
    rows += _many_accounts_row(runs, "sqlite", "SQLite", accounts)
    sqlite_multi = runs.get(multi_name("sqlite", workers))
    if sqlite_multi is not None:
        rows.append(
            Row(
                f"{_processes(workers)} on one SQLite file",
                _k(sqlite_multi.rps),
                f"{sqlite_multi.rps / sqlite.rps:.2f}{TIMES} one",
                _ms(sqlite_multi.p99_us),
            )
        )
    postgres = runs.get("postgres")
    if postgres is not None:
        rows.append(
            Row(
                "paysign, PostgreSQL",
                _k(postgres.rps),
                f"{postgres.rps / sqlite.rps:.0%} of SQLite",
                _ms(postgres.p99_us),
            )
        )
        rows += _many_accounts_row(runs, "postgres", "PostgreSQL", accounts)
        postgres_multi = runs.get(multi_name("postgres", workers))
        if postgres_multi is not None:
            rows.append(
                Row(
                    f"{_processes(workers)} on one PostgreSQL",
                    _k(postgres_multi.rps),
                    f"{postgres_multi.rps / postgres.rps:.2f}{TIMES} one",
                    _ms(postgres_multi.p99_us),
                )
            )
    return rows


def _many_accounts_row(
    runs: dict[str, Measured], database: str, label: str, accounts: int
) -> list[Row]:
    many = runs.get(many_name(database, accounts))
    if many is None:
        return []
    one = runs[database]
    return [
        Row(
            f"paysign, {label}, the load over {accounts} accounts",
            _k(many.rps),
            f"{many.rps / one.rps:.2f}{TIMES} one account",
            _ms(many.p99_us),
        )
    ]


def lone_added_us(runs: dict[str, Measured]) -> dict[str, float]:
    """What a lone request to each of our servers adds to the ceiling's round trip (µs)."""
    ceiling = runs["ceiling"].lone_p50_us
    return {name: m.lone_p50_us - ceiling for name, m in runs.items() if name != "ceiling"}


def lone_ratio(runs: dict[str, Measured]) -> float | None:
    """PostgreSQL's added lone-request latency over SQLite's (None without PostgreSQL)."""
    added = lone_added_us(runs)
    if "postgres" not in added:
        return None
    if added["sqlite"] <= 0:
        return float("inf") if added["postgres"] > 0 else 1.0
    return added["postgres"] / added["sqlite"]


def goal_checks(
    runs: dict[str, Measured], workers: int, connections: int, accounts: int = 0
) -> list[Check]:
    """Every goal the servers that ran can answer, failed requests always last. The goals are
    set on the load from one account; with ``accounts``, the p99 goal is checked on the load
    over that many as well."""
    sqlite, ceiling = runs["sqlite"], runs["ceiling"]
    postgres = runs.get("postgres")
    postgres_multi = runs.get(multi_name("postgres", workers))
    checks: list[Check] = []
    if postgres is not None:
        share = postgres.rps / sqlite.rps
        checks.append(
            Check(
                f"PostgreSQL ≥ {POSTGRES_OF_SQLITE:.0%} of the SQLite throughput",
                f"{share:.0%}",
                share >= POSTGRES_OF_SQLITE,
            )
        )
    on_both = [("SQLite", sqlite)] + ([("PostgreSQL", postgres)] if postgres else [])
    checks.append(
        Check(
            f"p99 ≤ {_ms(P99_LIMIT_US)} at {connections} connections"
            + (" on both databases" if postgres else " on SQLite"),
            ", ".join(f"{name} {_ms(m.p99_us)}" for name, m in on_both),
            all(m.p99_us <= P99_LIMIT_US for _, m in on_both),
        )
    )
    over_many = [
        (name, m)
        for name, m in (
            ("SQLite", runs.get(many_name("sqlite", accounts))),
            ("PostgreSQL", runs.get(many_name("postgres", accounts))),
        )
        if m is not None
    ]
    if over_many:
        checks.append(
            Check(
                f"p99 ≤ {_ms(P99_LIMIT_US)} at {connections} connections, the load over "
                f"{accounts} accounts",
                ", ".join(f"{name} {_ms(m.p99_us)}" for name, m in over_many),
                all(m.p99_us <= P99_LIMIT_US for _, m in over_many),
            )
        )
    ratio = lone_ratio(runs)
    if ratio is not None:
        added = lone_added_us(runs)
        checks.append(
            Check(
                f"a lone request on PostgreSQL adds ≤ {LONE_POSTGRES_OVER_SQLITE:g}{TIMES} "
                "what it adds on SQLite",
                f"{ratio:.2f}{TIMES} ({added['postgres']:,.0f} µs / {added['sqlite']:,.0f} µs)",
                ratio <= LONE_POSTGRES_OVER_SQLITE,
            )
        )
    if postgres is not None and postgres_multi is not None:
        gain = postgres_multi.rps / postgres.rps
        checks.append(
            Check(
                f"{_processes(workers)} on one PostgreSQL ≥ {TWO_PROCESSES_OVER_ONE:g}{TIMES} one",
                f"{gain:.2f}{TIMES}",
                gain >= TWO_PROCESSES_OVER_ONE,
            )
        )
    share = sqlite.rps / ceiling.rps
    checks.append(
        Check(
            f"SQLite (durable) ≥ {SQLITE_OF_CEILING:.0%} of the bare Starlette ceiling",
            f"{share:.0%}",
            share >= SQLITE_OF_CEILING,
        )
    )
    failed = sum(m.non2xx for name, m in runs.items() if name != "ceiling")
    checks.append(Check("0 failed requests (non-2xx)", str(failed), failed == 0))
    return checks


def summary_markdown(
    runs: dict[str, Measured], workers: int, connections: int, accounts: int = 0
) -> str:
    """The summary table, the lone-request table and the goal checks, as markdown."""
    lines = ["| | req/s | share | p99 |", "| --- | ---: | ---: | ---: |"]
    rows = summary_rows(runs, workers, accounts)
    lines += [f"| {r.label} | {r.rps} | {r.share} | {r.p99} |" for r in rows]
    labels = {
        "sqlite": "SQLite",
        multi_name("sqlite", workers): f"{_processes(workers)}, SQLite",
        "postgres": "PostgreSQL",
        multi_name("postgres", workers): f"{_processes(workers)}, PostgreSQL",
    }
    added = lone_added_us(runs)
    ceiling = runs["ceiling"].lone_p50_us
    lines += [
        "",
        "| lone request (1 keep-alive connection, one at a time) | p50 "
        "| adds over the ceiling's round trip |",
        "| --- | ---: | ---: |",
        f"| bare Starlette (ceiling) | {ceiling:,.0f} µs | — |",
    ]
    lines += [
        f"| {label} | {runs[name].lone_p50_us:,.0f} µs | {added[name]:,.0f} µs |"
        for name, label in labels.items()
        if name in runs
    ]
    ratio = lone_ratio(runs)
    if ratio is not None:
        lines.append(f"\nPostgreSQL adds {ratio:.2f}{TIMES} what SQLite adds to a lone request.")
    lines += ["", "| goal | measured | |", "| --- | ---: | --- |"]
    lines += [
        f"| {c.goal} | {c.measured} | {'✅' if c.ok else '❌'} |"
        for c in goal_checks(runs, workers, connections, accounts)
    ]
    return "\n".join(lines)
