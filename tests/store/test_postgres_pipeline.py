"""Statements in one flush (store/postgres_pipeline.py), on a real PostgreSQL: answers in order
and typed as psycopg types them, a failure raised as itself with the rest skipped, statements
prepared once per connection (or never, for a pooler), a pipeline bigger than the socket's
buffers, and a cancelled one leaving no connection half-way."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import AsyncConnection

from conftest import POSTGRES_URL
from paysign.store.database import normalise_url
from paysign.store.postgres_pipeline import Command, Pipeline

PLAIN_URL = normalise_url(POSTGRES_URL).replace("postgresql+psycopg://", "postgresql://")

#: Against hanging, not a measure of speed.
DEADLINE_SECONDS = 60

PREPARED_HERE = "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'paysign%%'"


T = TypeVar("T")


def on_a_connection(scenario: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
    """``scenario`` run on an event loop, given a fresh connection with a table of its own."""

    async def run() -> T:
        conn = await AsyncConnection.connect(PLAIN_URL, autocommit=True)
        await conn.execute("CREATE TEMP TABLE notes (id int PRIMARY KEY, body bytea, tag text)")
        try:
            return await scenario(conn)
        finally:
            await conn.close()

    return asyncio.run(run())


def test_each_statement_answers_in_order_with_psycopgs_types() -> None:
    on_a_connection(_test_each_statement_answers_in_order_with_psycopgs_types)


async def _test_each_statement_answers_in_order_with_psycopgs_types(
    conn: AsyncConnection[Any],
) -> None:
    pipeline = Pipeline(conn, prepare=True)
    rows = await pipeline.run(
        [
            Command("BEGIN"),
            Command(
                "INSERT INTO notes VALUES (%(id)s, %(body)s, %(tag)s) RETURNING id",
                {"id": 1, "body": b"\x00\xff", "tag": None},
            ),
            Command("SELECT %s::bigint, %s::text, %s::boolean", (2**40, "ü", True)),
            Command("SELECT * FROM unnest(CAST(%s AS BYTEA[]))", ([b"a", b"b"],)),
            Command("SELECT id, body, tag FROM notes"),
            Command("COMMIT"),
        ]
    )
    assert rows == [
        [],
        [(1,)],
        [(2**40, "ü", True)],
        [(b"a",), (b"b",)],
        [(1, b"\x00\xff", None)],
        [],
    ]


def test_a_failure_raises_itself_and_nothing_after_it_runs() -> None:
    on_a_connection(_test_a_failure_raises_itself_and_nothing_after_it_runs)


async def _test_a_failure_raises_itself_and_nothing_after_it_runs(
    conn: AsyncConnection[Any],
) -> None:
    pipeline = Pipeline(conn, prepare=True)
    with pytest.raises(psycopg.errors.DivisionByZero):
        await pipeline.run(
            [
                Command("BEGIN"),
                Command("INSERT INTO notes (id) VALUES (1)"),
                Command("SELECT 1 / (CASE WHEN %s THEN 1 ELSE 0 END)", (False,)),
                Command("INSERT INTO notes (id) VALUES (2)"),
                Command("COMMIT"),
            ]
        )
    # The transaction is failed, not committed: rolled back, the connection serves on.
    await conn.execute("ROLLBACK")
    assert await pipeline.run([Command("SELECT count(*) FROM notes")]) == [[(0,)]]


def test_a_statement_is_prepared_once_per_connection() -> None:
    on_a_connection(_test_a_statement_is_prepared_once_per_connection)


async def _test_a_statement_is_prepared_once_per_connection(conn: AsyncConnection[Any]) -> None:
    pipeline = Pipeline(conn, prepare=True)
    commands = [
        Command("SELECT %s::int + 1", (1,)),
        Command("SELECT %s::text", ("x",)),
        Command("SELECT %s::int + 1", (2,)),  # the same statement again, in the same flush
    ]
    assert await pipeline.run(commands) == [[(2,)], [("x",)], [(3,)]]
    assert await pipeline.run([Command(PREPARED_HERE)]) == [[(3,)]]  # the count itself too
    assert await pipeline.run(commands) == [[(2,)], [("x",)], [(3,)]]
    assert await pipeline.run([Command("SELECT %s::bigint", (7,))]) == [[(7,)]]
    assert await pipeline.run([Command(PREPARED_HERE)]) == [[(4,)]]


def test_nothing_is_prepared_for_a_pooler() -> None:
    on_a_connection(_test_nothing_is_prepared_for_a_pooler)


async def _test_nothing_is_prepared_for_a_pooler(conn: AsyncConnection[Any]) -> None:
    pipeline = Pipeline(conn, prepare=False)
    for _ in range(3):
        assert await pipeline.run([Command("SELECT %s::int", (5,))]) == [[(5,)]]
    assert await pipeline.run([Command(PREPARED_HERE)]) == [[(0,)]]


def test_a_statement_that_fails_to_prepare_is_not_taken_for_prepared() -> None:
    on_a_connection(_test_a_statement_that_fails_to_prepare_is_not_taken_for_prepared)


async def _test_a_statement_that_fails_to_prepare_is_not_taken_for_prepared(
    conn: AsyncConnection[Any],
) -> None:
    pipeline = Pipeline(conn, prepare=True)
    with pytest.raises(psycopg.errors.UndefinedTable):
        await pipeline.run([Command("SELECT * FROM no_such_table WHERE 1 = %s", (1,))])
    await conn.execute("CREATE TEMP TABLE no_such_table (n int)")
    statement = Command("SELECT count(*) FROM no_such_table WHERE 1 = %s", (1,))
    with pytest.raises(psycopg.errors.UndefinedTable):  # the name was never made
        await pipeline.run([Command("SELECT * FROM no_such_table_either WHERE 1 = %s", (1,))])
    assert await pipeline.run([statement]) == [[(0,)]]


def test_a_pipeline_bigger_than_the_sockets_buffers() -> None:
    on_a_connection(_test_a_pipeline_bigger_than_the_sockets_buffers)


async def _test_a_pipeline_bigger_than_the_sockets_buffers(conn: AsyncConnection[Any]) -> None:
    pipeline = Pipeline(conn, prepare=True)
    body = b"x" * 4096
    inserts = [
        Command("INSERT INTO notes VALUES (%s, %s) RETURNING length(body)", (i, body))
        for i in range(2_000)
    ]
    rows = await pipeline.run([Command("BEGIN"), *inserts, Command("COMMIT")])
    assert rows[1:-1] == [[(4096,)]] * 2_000
    assert await pipeline.run([Command("SELECT count(*) FROM notes")]) == [[(2_000,)]]


def test_big_statements_with_big_answers_do_not_wait_on_each_other() -> None:
    on_a_connection(_test_big_statements_with_big_answers_do_not_wait_on_each_other)


async def _test_big_statements_with_big_answers_do_not_wait_on_each_other(
    conn: AsyncConnection[Any],
) -> None:
    # The server answers while the rest is still being sent, both ways far more than the
    # sockets hold: the answers must be taken in while sending, or the server stops reading.
    pipeline = Pipeline(conn, prepare=True)
    body = b"x" * 65_536
    echoes = [Command("SELECT %s::bytea", (body,)) for _ in range(400)]
    rows = await asyncio.wait_for(pipeline.run(echoes), DEADLINE_SECONDS)
    assert rows == [[(body,)]] * 400


def test_a_cancelled_pipeline_closes_its_connection_and_the_loop_ran_meanwhile() -> None:
    on_a_connection(_test_a_cancelled_pipeline_closes_its_connection_and_the_loop_ran_meanwhile)


async def _test_a_cancelled_pipeline_closes_its_connection_and_the_loop_ran_meanwhile(
    conn: AsyncConnection[Any],
) -> None:
    other = await AsyncConnection.connect(PLAIN_URL)  # holds the lock the pipeline waits for
    try:
        await other.execute("SELECT pg_advisory_xact_lock(4242)")
        pipeline = Pipeline(conn, prepare=True)
        waiting = asyncio.ensure_future(
            pipeline.run([Command("SELECT pg_advisory_xact_lock(%s)", (4242,))])
        )
        ticks = 0
        for _ in range(20):
            await asyncio.sleep(0.01)
            ticks += 1
        assert not waiting.done() and ticks == 20
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert conn.closed  # its results were never read: not to be used again
    finally:
        await other.rollback()
        await other.close()
