"""psycopg's pipeline mode against ``paysign.store.postgres_pipeline``, side by side.

Each round trip is ``BEGIN``, N statements and ``COMMIT`` on one connection, awaited on an
event loop: through psycopg's ``AsyncConnection.pipeline()`` (each statement sent as it is
executed), then through ``Pipeline.run`` (all of them in one flush). Rounds alternate, and the
medians are printed with their ratio.

    .venv/bin/python bench/pipeline_transport.py [--url postgresql://...] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import AsyncConnection

from paysign.store.postgres_pipeline import Command, Pipeline

#: A statement with parameters of the kinds the signing path sends, and a row back.
STATEMENT = "SELECT %(id)s::bigint, %(key)s::bytea, %(host)s::text"


def params(i: int) -> dict[str, Any]:
    return {"id": i, "key": i.to_bytes(32, "big"), "host": f"api{i}.example.com"}


async def through_psycopg(conn: AsyncConnection[Any], n: int) -> None:
    cursors = []
    async with conn.pipeline():
        await conn.execute("BEGIN")
        for i in range(n):
            cursor = conn.cursor()
            await cursor.execute(STATEMENT, params(i))
            cursors.append(cursor)
        for cursor in cursors:
            await cursor.fetchall()
        await conn.execute("COMMIT")


def through_one_flush(pipeline: Pipeline) -> Callable[[AsyncConnection[Any], int], Awaitable[Any]]:
    async def run(_: AsyncConnection[Any], n: int) -> None:
        commands = [Command(STATEMENT, params(i)) for i in range(n)]
        await pipeline.run([Command("BEGIN"), *commands, Command("COMMIT")])

    return run


async def median_us(
    way: Callable[[AsyncConnection[Any], int], Awaitable[Any]],
    conn: AsyncConnection[Any],
    n: int,
    repeats: int,
) -> float:
    for _ in range(20):  # prepared, warm
        await way(conn, n)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        await way(conn, n)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


async def main(url: str, counts: list[int], rounds: int, repeats: int) -> None:
    plain = await AsyncConnection.connect(url, autocommit=True)
    flushed = await AsyncConnection.connect(url, autocommit=True)
    one_flush = through_one_flush(Pipeline(flushed, prepare=True))
    print("| statements between BEGIN and COMMIT | psycopg pipeline | one flush | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for n in counts:
        mine: list[float] = []
        theirs: list[float] = []
        for _ in range(rounds):
            theirs.append(await median_us(through_psycopg, plain, n, repeats))
            mine.append(await median_us(one_flush, flushed, n, repeats))
        a, b = statistics.median(theirs), statistics.median(mine)
        print(f"| {n} | {a:,.0f} µs | {b:,.0f} µs | {a / b:.2f}x |")
    await plain.close()
    await flushed.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--counts", default="1,4,8,32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    asyncio.run(main(args.url, counts, args.rounds, args.repeats))
