"""The big state's bulk load, straight into the server's database (SQLite file or PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.progress import log
from paysign.store import repositories

#: The ledger's rows (``bench.ledger``) hold the values in this order.
SIGNATURE_COLUMNS = ", ".join(repositories.SIGNATURE_COLUMNS)


class BulkDb:
    """A direct DB-API connection for the bulk load (SQLite file or PostgreSQL schema)."""

    def __init__(self, data_dir: Path, pg: tuple[str, str] | None) -> None:
        self.pg = pg
        if pg is None:
            import sqlite3

            self.conn: Any = sqlite3.connect(data_dir / "paysign.db", isolation_level=None)
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=10000"):
                self.conn.execute(f"PRAGMA {pragma}")
            self.conn.execute("PRAGMA cache_size=-262144")  # 256 MiB: the loader's own cache
            self.mark = "?"
        else:
            import psycopg

            base_url, schema = pg
            self.conn = psycopg.connect(base_url)
            self.conn.execute(f'SET search_path TO "{schema}"')
            self.conn.commit()
            self.mark = "%s"

    def begin(self) -> None:
        if self.pg is None:
            self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        if self.pg is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.commit()

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        cur = self.conn.execute(sql.replace("?", self.mark), params)
        row = cur.fetchone()
        if self.pg is not None:
            self.conn.commit()
        return row

    def insert_many(self, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        marks = ", ".join([self.mark] * len(columns.split(",")))
        sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
        self.conn.cursor().executemany(sql, rows)

    def copy_signatures(self, rows: list[tuple[Any, ...]]) -> None:
        if self.pg is None:
            self.insert_many("signatures", SIGNATURE_COLUMNS, rows)
            return
        with (
            self.conn.cursor() as cur,
            cur.copy(f"COPY signatures ({SIGNATURE_COLUMNS}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)

    def finish(self) -> str:
        """What a live database would have done by itself after such a load; says what."""
        if self.pg is None:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return "WAL checkpoint (TRUNCATE); no ANALYZE (paysign never runs one on SQLite)"
        self.conn.autocommit = True
        for table in ("signatures", "api_keys", "wallets", "accounts", "policy_rules"):
            self.conn.execute(f"VACUUM (ANALYZE) {table}")
        how = "VACUUM (ANALYZE) of the loaded tables, as autovacuum would after such a load"
        try:  # flush the load now, not during the timed runs (needs pg_checkpoint or superuser)
            self.conn.execute("CHECKPOINT")
        except Exception as exc:
            log(f"CHECKPOINT refused ({exc}); the server may checkpoint during the runs")
            return how
        return how + ", and a CHECKPOINT"

    def size(self) -> str:
        if self.pg is None:
            rows = self.one("PRAGMA page_count")[0] * self.one("PRAGMA page_size")[0]
            return f"database file {rows / 2**20:,.0f} MiB"
        total = self.one("SELECT pg_total_relation_size('signatures')")[0]
        return f"`signatures` with its indexes {total / 2**20:,.0f} MiB"

    def grants_plan(self, account_id: str, hosts: list[str]) -> str:
        marks = ", ".join([self.mark] * len(hosts))
        query = (
            f"SELECT kind, host, path FROM policy_rules WHERE account_id = {self.mark} "
            f"AND host IN ({marks})"
        )
        try:
            if self.pg is None:
                rows = self.conn.execute("EXPLAIN QUERY PLAN " + query, (account_id, *hosts))
                return "; ".join(str(r[-1]) for r in rows.fetchall())
            cur = self.conn.execute("EXPLAIN (COSTS OFF) " + query, (account_id, *hosts))
            return "; ".join(r[0].strip() for r in cur.fetchall())
        except Exception as exc:
            return f"(no plan: {exc})"

    def close(self) -> None:
        self.conn.close()
