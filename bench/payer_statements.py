"""A batch of known payers' guard: one statement per payer, or one for them all.

A batch run on what earlier batches read of its payers (``store/known_payers.py``) checks that
each payer's key, holder and rules are unchanged. Here the check goes through ``Pipeline.run``
with ``BEGIN`` and ``COMMIT``, for N payers made by the services in a throwaway schema (its
migrations applied): ``GUARD_HOLDERS_UNCHANGED`` once for all, against once per payer (each
with that payer alone, as the statement per payer it replaced cost the same for one). Rounds
alternate; each prints the medians of the wall time and of this process's CPU per batch (what
the server's event loop pays), and their ratios.

    .venv/bin/python bench/payer_statements.py [--url postgresql://...] [--counts 1,4,16,32]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from psycopg import AsyncConnection

# Run as a script, Python puts bench/ itself on sys.path, not the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pg_schema import postgres_schema, sqlalchemy_url
from paysign.clock import SystemClock
from paysign.custody import EnvelopeVault
from paysign.policy.rules import candidate_hosts
from paysign.policy.seller import seller_location
from paysign.services import accounts, keys, policy
from paysign.services.keys import hash_api_key
from paysign.store import signing_sql as sql
from paysign.store.database import Database
from paysign.store.migrate import migrate
from paysign.store.postgres_pipeline import Command, Pipeline
from paysign.store.postgres_statements import psycopg_style

HOSTS = tuple(candidate_hosts(seller_location("https://api.example.com/weather")))
GUARD = psycopg_style(sql.GUARD_HOLDERS_UNCHANGED)


class Payer:
    """A payer as a known-payer batch has them: key hash, digest of what was read."""

    def __init__(self, key_hash: bytes, fingerprint: bytes) -> None:
        self.key_hash, self.fingerprint = key_hash, fingerprint

    def guard(self, now: int) -> dict[str, object]:
        return {
            "key_hash": self.key_hash.hex(),
            "now": now,
            "hosts": HOSTS,
            "fingerprint": self.fingerprint.hex(),
        }


def make_payers(url: str, count: int) -> list[bytes]:
    """``count`` accounts with an API key and an allow rule on the seller: the keys' hashes."""
    db, clock = Database(url), SystemClock()
    migrate(db)
    vault = EnvelopeVault(secrets.token_bytes(32))
    made = []
    for _ in range(count):
        email = f"bench-{secrets.token_hex(4)}@example.com"
        accounts.create_account(db, vault, clock, email=email, password="benchmark password 1234")
        issued = keys.issue_key(db, clock, email=email, expires_in_days=1)
        policy.decide_seller(db, clock, email=email, seller="api.example.com", kind="allow")
        made.append(hash_api_key(issued.api_key))
    db.dispose()
    return made


async def read_payers(pipeline: Pipeline, made: list[bytes]) -> list[Payer]:
    """Each payer's digest, as a batch reads it."""
    now = int(time.time())
    names = {f"h{i}": host for i, host in enumerate(HOSTS)}
    read = psycopg_style(sql.fingerprinted_holder_sql(len(HOSTS)))
    payers = []
    for key_hash in made:
        params = {"key_hash": key_hash, "now": now, **names}
        [holder_rows] = await pipeline.run([Command(read, params)])
        payers.append(Payer(key_hash, bytes(holder_rows[0][0])))
    return payers


def per_payer(payers: list[Payer], now: int) -> list[Command]:
    return [Command(GUARD, {"guards": orjson.dumps([p.guard(now)]).decode()}) for p in payers]


def for_all(payers: list[Payer], now: int) -> list[Command]:
    return [Command(GUARD, {"guards": orjson.dumps([p.guard(now) for p in payers]).decode()})]


Way = Callable[[list[Payer], int], list[Command]]


async def medians(
    pipeline: Pipeline, way: Way, payers: list[Payer], repeats: int
) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        await pipeline.run([Command("BEGIN"), *way(payers, int(time.time())), Command("COMMIT")])
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6


async def main(url: str, counts: list[int], rounds: int, repeats: int) -> None:
    with postgres_schema(url) as schema:
        made = make_payers(sqlalchemy_url(url, schema), max(counts))
        conn = await AsyncConnection.connect(url, autocommit=True)
        await conn.execute(f'SET search_path TO "{schema}"')
        pipeline = Pipeline(conn, prepare=True)
        payers = await read_payers(pipeline, made)
        print("| payers | per payer: wall | for all | per payer: CPU | for all | wall ratio |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in counts:
            seen: dict[str, list[tuple[float, float]]] = {"per payer": [], "for all": []}
            ways: tuple[tuple[str, Way], ...] = (("per payer", per_payer), ("for all", for_all))
            for _ in range(rounds):
                for name, way in ways:
                    seen[name].append(await medians(pipeline, way, payers[:n], repeats))
            pw, pc = (statistics.median(x) for x in zip(*seen["per payer"], strict=True))
            aw, ac = (statistics.median(x) for x in zip(*seen["for all"], strict=True))
            print(
                f"| {n} | {pw:,.0f} µs | {aw:,.0f} µs | {pc:,.0f} µs | {ac:,.0f} µs "
                f"| {pw / aw:.2f}x |"
            )
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--counts", default="1,4,16,32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.url, [int(c) for c in args.counts.split(",")], args.rounds, args.repeats))
