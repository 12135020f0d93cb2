"""A throwaway PostgreSQL schema for a run, and the SQLAlchemy URL that lands in it."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator

from bench.progress import log


@contextlib.contextmanager
def postgres_schema(base_url: str) -> Iterator[str]:
    import psycopg

    schema = f"paysign_bench_{secrets.token_hex(4)}"
    try:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except psycopg.OperationalError as exc:
        raise SystemExit(
            f"PostgreSQL is not reachable at {base_url} ({str(exc).strip()}): start it, "
            "pass --postgres-url, or run with --no-postgres"
        ) from exc
    try:
        yield schema
    finally:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        log(f"dropped schema {schema}")


def sqlalchemy_url(base_url: str, schema: str) -> str:
    rest = base_url.split("://", 1)[1]
    sep = "&" if "?" in rest else "?"
    return f"postgresql+psycopg://{rest}{sep}options=-csearch_path%3D{schema}"
