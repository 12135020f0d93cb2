"""The big state's ledger: other accounts with keys, and a month of signatures, bulk-loaded."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from typing import Any

from bench.bulk_db import BulkDb
from bench.made_up_hosts import SUBDOMAINS, TLDS, WORDS
from bench.progress import log
from bench.request import USDC_BASE, USDC_SEPOLIA

DAY_S = 86_400
LEDGER_DAYS = 30
LEDGER_CHUNK = 50_000  # rows generated at a time
LEDGER_TX_ROWS = 250_000  # rows per bulk transaction
BIG_SEED = 402  # the same made-up policy and ledger on every run
_LEDGER_PATHS = ["/", "/v1/quote", "/weather", "/v2/search", "/api/data", "/graphql", "/v1/chat"]


def fake_accounts(
    count: int, now: int, rng: Any
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Rows of ``accounts``, ``wallets``, ``api_keys`` for ``count`` other accounts: one live key
    each, and an older revoked key for about a third of them."""
    import uuid

    accounts, wallets, keys = [], [], []
    for i in range(count):
        account_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        created = now - rng.randrange(LEDGER_DAYS * DAY_S, 400 * DAY_S)
        accounts.append(
            (
                account_id,
                f"agent-{i}-{rng.getrandbits(32):08x}@example.net",
                "$argon2id$v=19$m=65536,t=3,p=4$" + rng.randbytes(16).hex(),
                os.urandom(69),
                created,
            )
        )
        wallets.append(
            (
                str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                account_id,
                "0x" + os.urandom(20).hex(),
                os.urandom(76),
                created,
            )
        )
        for revoked in ([True] if rng.random() < 0.33 else []) + [False]:
            key_created = created if revoked else now - rng.randrange(DAY_S, LEDGER_DAYS * DAY_S)
            keys.append(
                (
                    str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    account_id,
                    os.urandom(32),
                    "psk_" + rng.randbytes(3).hex()[:4],
                    key_created,
                    key_created + 90 * DAY_S,
                    key_created + 10 * DAY_S if revoked else None,
                    None if revoked else now - rng.randrange(3600),
                )
            )
    return accounts, wallets, keys


def ledger_chunks(
    owners: list[tuple[str, str]],
    own: tuple[str, str],
    total: int,
    own_rows: int,
    now: int,
    rng: Any,
) -> Iterator[list[tuple[Any, ...]]]:
    """``total`` signature rows over the past 30 days, in time order like a real ledger.

    ``owners`` are (account id, api key id) of the other accounts, whose shares follow a
    Pareto law (a few heavy agents, a long tail); ``own`` gets ``own_rows`` of them."""
    weights = [min(rng.paretovariate(1.2), 200.0) for _ in owners]
    scale = (total - own_rows) / sum(weights)
    population = [*owners, own]
    cum, acc = [], 0.0
    for w in [*(w * scale for w in weights), float(own_rows)]:
        acc += w
        cum.append(acc)
    sellers = [
        (
            f"{rng.choice(SUBDOMAINS) or 'api'}.{rng.choice(WORDS)}{i}.{rng.choice(TLDS)}",
            "0x" + rng.randbytes(20).hex(),
        )
        for i in range(3000)
    ]
    amounts = (1000, 5000, 10000, 10000, 50000, 100000, 250000, 1000000)
    timeouts = (60, 60, 120, 300, 600)
    start = now - LEDGER_DAYS * DAY_S
    chunks = max(1, -(-total // LEDGER_CHUNK))
    span = LEDGER_DAYS * DAY_S / chunks
    done = 0
    for c in range(chunks):
        n = min(LEDGER_CHUNK, total - done)
        done += n
        lo = int(start + c * span)
        times = sorted(rng.randrange(lo, int(lo + span)) for _ in range(n))
        who = rng.choices(population, cum_weights=cum, k=n)
        nonces = os.urandom(32 * n)
        rows = []
        for j in range(n):
            created = times[j]
            host, pay_to = sellers[int(rng.paretovariate(1.0)) % len(sellers)]
            testnet = rng.random() < 0.3
            valid_before = created + rng.choice(timeouts)
            r = rng.random()
            if valid_before > now - 180:
                status = "signed"  # not reconciled yet
            elif not testnet and r < 0.08:  # mainnet has no RPC by default: never reconciled
                status = "signed"
            else:  # the sandbox network is reconciled (against the dev chain by default)
                status = "expired" if r < 0.3 else "settled"
            rows.append(
                (
                    who[j][0],
                    who[j][1],
                    host,
                    rng.choice(_LEDGER_PATHS),
                    "eip155:84532" if testnet else "eip155:8453",
                    USDC_SEPOLIA if testnet else USDC_BASE,
                    pay_to,
                    rng.choice(amounts),
                    nonces[32 * j : 32 * j + 32],
                    valid_before,
                    testnet and r < 0.15,
                    2 if r < 0.9 else 1,
                    status,
                    created,
                    "OPEN_ECOSYSTEM" if r < 0.7 else "STANDARD",
                    host,
                )
            )
        yield rows


def load_ledger(db: BulkDb, own_key: str, args: argparse.Namespace) -> dict[str, Any]:
    """Other accounts (with wallets and keys) and ``--big-ledger`` signature rows."""
    import random

    from paysign.services.keys import hash_api_key

    rng = random.Random(BIG_SEED + 1)
    now = int(time.time())
    own_row = db.one(
        "SELECT id, account_id FROM api_keys WHERE key_hash = ?", (hash_api_key(own_key),)
    )
    own = (str(own_row[1]), str(own_row[0]))
    started = time.monotonic()
    accounts, wallets, keys = fake_accounts(args.big_accounts, now, rng)
    db.begin()
    db.insert_many("accounts", "id, email, password_hash, sealed_totp_secret, created_at", accounts)
    db.insert_many("wallets", "id, account_id, address, sealed_key, created_at", wallets)
    db.insert_many(
        "api_keys",
        "id, account_id, key_hash, display_prefix, created_at, expires_at, revoked_at, "
        "last_used_at",
        keys,
    )
    db.commit()
    owners = [(k[1], k[0]) for k in keys if k[6] is None]
    own_rows = min(args.big_ledger, max(1, args.big_ledger // 100))
    in_tx = 0
    db.begin()
    for rows in ledger_chunks(owners, own, args.big_ledger, own_rows, now, rng):
        db.copy_signatures(rows)
        in_tx += len(rows)
        if in_tx >= LEDGER_TX_ROWS:
            db.commit()
            log(f"  ledger: {in_tx:,} rows committed ({time.monotonic() - started:.0f} s)")
            in_tx = 0
            db.begin()
    db.commit()
    loaded = time.monotonic() - started
    finished = time.monotonic()
    how = db.finish()
    return {
        "ledger_s": loaded,
        "finish_s": time.monotonic() - finished,
        "finish_how": how,
        "own_rows": own_rows,
        "own_account": own[0],
        "size": db.size(),
        "total_rows": db.one("SELECT count(*) FROM signatures")[0],
    }
