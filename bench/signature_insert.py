"""A batch's signatures inserted in one statement: one typed array per column, or one JSON text.

Both go through ``Pipeline.run`` as ``BEGIN``, the insert and ``COMMIT``, into the real
``signatures`` table of a throwaway schema (its migrations applied), with rows made as the
signing path makes them. Rounds alternate; each prints the medians of the wall time and of this
process's CPU per batch (what the server's event loop pays), and their ratios.

    .venv/bin/python bench/signature_insert.py [--url postgresql://...] [--counts 1,4,8,16,32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from psycopg import AsyncConnection

# Run as a script, Python puts bench/ itself on sys.path, not the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pg_schema import postgres_schema, sqlalchemy_url
from paysign.store import signing_sql as sql
from paysign.store.postgres_pipeline import Command, Pipeline
from paysign.store.postgres_statements import psycopg_style
from paysign.store.repositories import SIGNATURE_COLUMNS, SignatureRecord
from paysign.store.schema import accounts, api_keys, metadata, signatures
from paysign.store.signing_statements import signature_row, signatures_json

_ARRAY_OF = {str: "TEXT[]", int: "BIGINT[]", bytes: "BYTEA[]", bool: "BOOLEAN[]"}

#: The form the JSON text replaced: every column as an array, ``unnest`` into rows.
FROM_ARRAYS = psycopg_style(
    f"INSERT INTO signatures ({', '.join(SIGNATURE_COLUMNS)})\nSELECT * FROM unnest("
    + ", ".join(
        f"CAST(? AS {_ARRAY_OF[signatures.c[c].type.python_type]})" for c in SIGNATURE_COLUMNS
    )
    + ")"
)
FROM_JSON = psycopg_style(sql.INSERT_SIGNATURES_FROM_JSON)


def records(account_id: str, n: int) -> list[SignatureRecord]:
    return [
        SignatureRecord(
            account_id=account_id,
            api_key_id=None,
            seller_host="api.example.com",
            seller_path="/v1/weather",
            network="eip155:8453",
            asset="0x" + "ab" * 20,
            pay_to="0x" + "cd" * 20,
            amount=10_000,
            nonce=os.urandom(32),
            valid_before=1_800_000_000,
            sandbox=False,
            x402_version=2,
            created_at=1_790_000_000,
            rule="allow:api.example.com",
        )
        for _ in range(n)
    ]


def as_arrays(batch: list[SignatureRecord]) -> Command:
    return Command(FROM_ARRAYS, [list(c) for c in zip(*map(signature_row, batch), strict=True)])


def as_json(batch: list[SignatureRecord]) -> Command:
    return Command(FROM_JSON, (signatures_json(batch),))


async def medians(
    pipeline: Pipeline, way: Callable[[list[SignatureRecord]], Command], batches: list[Any]
) -> tuple[float, float]:
    walls, cpus = [], []
    for batch in batches:
        wall, cpu = time.perf_counter(), time.process_time()
        await pipeline.run([Command("BEGIN"), way(batch), Command("COMMIT")])
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6


async def main(url: str, counts: list[int], rounds: int, repeats: int) -> None:
    with postgres_schema(url) as schema:
        engine = sa.create_engine(sqlalchemy_url(url, schema))
        metadata.create_all(engine, tables=[accounts, api_keys, signatures])
        account = "bench-account"
        with engine.begin() as db:
            row = {"password_hash": "-", "sealed_totp_secret": b"-", "created_at": 0}
            db.execute(accounts.insert().values(id=account, email="bench@example.com", **row))
        engine.dispose()
        conn = await AsyncConnection.connect(url, autocommit=True)
        await conn.execute(f'SET search_path TO "{schema}"')
        pipeline = Pipeline(conn, prepare=True)
        print("| signatures | arrays: wall | JSON: wall | arrays: CPU | JSON: CPU | CPU ratio |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in counts:
            seen: dict[str, list[tuple[float, float]]] = {"arrays": [], "json": []}
            for _ in range(rounds):
                for name, way in (("arrays", as_arrays), ("json", as_json)):
                    batches = [records(account, n) for _ in range(repeats)]
                    seen[name].append(await medians(pipeline, way, batches))
            aw, ac = (statistics.median(x) for x in zip(*seen["arrays"], strict=True))
            jw, jc = (statistics.median(x) for x in zip(*seen["json"], strict=True))
            print(
                f"| {n} | {aw:,.0f} µs | {jw:,.0f} µs | {ac:,.0f} µs | {jc:,.0f} µs "
                f"| {ac / jc:.2f}x |"
            )
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--counts", default="1,4,8,16,32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    asyncio.run(main(args.url, counts, args.rounds, args.repeats))
