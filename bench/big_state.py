"""``--big-state``: our endpoint with an empty policy, then with 10,000 rules and a big ledger."""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

from bench.accounts import POLICY_NOTE, bench_account
from bench.big_policy import big_policy
from bench.big_state_report import WITHIN, BigReport, BigRun, report_big_state
from bench.bulk_db import BulkDb
from bench.http_load import load, pick_loadgen
from bench.ledger import BIG_SEED, load_ledger
from bench.paysign_cli import admin
from bench.pg_schema import postgres_schema, sqlalchemy_url
from bench.processes import stop, stop_all, tail
from bench.progress import log
from bench.request import REQUEST_BODY, request_body_bytes
from bench.sequential import verify
from bench.servers import Target, start_paysign
from bench.store_timings import store_timings


def big_state_backend(
    name: str,
    args: argparse.Namespace,
    workdir: Path,
    loadgen: str,
    body: bytes,
    body_file: Path,
    pg: tuple[str, str] | None,
) -> BigReport:
    report = BigReport(name)
    database_url = None if pg is None else sqlalchemy_url(*pg)
    log(f"[{name}] starting paysign with a fresh account, empty policy (1 allow rule)")
    a = start_paysign(name, workdir, database_url)
    data_dir = workdir / name
    verify(a, body)
    rows_now = 0

    def measure_run(target: Target, label: str, role: str, rules: int) -> None:
        load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        result = load(target, args, body_file, args.duration, loadgen)
        result["load1"] = load1
        if not result["requests"]:
            raise SystemExit(
                f"[{name}] {label}: not one answer in {args.duration:g} s, the server hangs; "
                f"its log ends with:\n{tail(target.log_path)}"
            )
        report.runs.append(BigRun(label, role, rules, rows_now, result))
        log(
            f"[{name}] {label}: {result['rps']:,.0f} req/s, p50 {result['p50_us']} µs, "
            f"p99 {result['p99_us']} µs, CPU/req {result.get('cpu_us', float('nan')):.0f} µs, "
            f"non-2xx {result['non2xx']}"
        )

    report.timings["A, before the load"] = store_timings(
        database_url, data_dir, str(a.api_key), args.big_timing_n
    )
    log(f"[{name}] warm-up ({args.warmup:g} s)")
    load(a, args, body_file, args.warmup, loadgen)
    db = BulkDb(data_dir, pg)
    try:
        for i in range(args.rounds):
            rows_now = db.one("SELECT count(*) FROM signatures")[0]
            measure_run(a, f"A, empty policy, before the load ({i + 1})", "empty", 1)

        rng = random.Random(BIG_SEED)
        policy = big_policy(args.big_rules, rng)
        policy_file = workdir / f"{name}-big-policy.json"
        policy_file.write_text(json.dumps(policy))
        log(f"[{name}] paysign admin set-policy with {args.big_rules:,} rules")
        started = time.monotonic()
        doc = admin(a.env, "set-policy", "--email", a.email, "--file", str(policy_file))
        report.load["policy_s"] = time.monotonic() - started
        stored = len(doc["allow"]) + len(doc["deny"])
        if stored != args.big_rules:
            raise SystemExit(f"set-policy stored {stored} rules, not {args.big_rules}")
        report.load["allow"], report.load["deny"] = len(doc["allow"]), len(doc["deny"])
        log(f"[{name}] set-policy took {report.load['policy_s']:.1f} s")

        log(
            f"[{name}] bulk-loading {args.big_ledger:,} signatures over "
            f"{args.big_accounts:,} other accounts"
        )
        report.load.update(load_ledger(db, str(a.api_key), args))
        log(
            f"[{name}] ledger loaded in {report.load['ledger_s']:.1f} s, then "
            f"{report.load['finish_s']:.1f} s for: {report.load['finish_how']}"
        )
        from paysign.policy.rules import candidate_hosts, seller_location

        hosts = candidate_hosts(seller_location(str(REQUEST_BODY["sellerUrl"])))
        report.plan = db.grants_plan(report.load["own_account"], hosts)
        rows_now = report.load["total_rows"]

        log(f"[{name}] second account B with an empty policy, same server and ledger")
        _, key_b = bench_account(a.env, workdir)
        b = Target(f"{name}-B", a.port, key_b, a.proc, a.log_path)
        verify(a, body)
        verify(b, body)
        report.timings["A, 10k rules, after the load"] = store_timings(
            database_url, data_dir, str(a.api_key), args.big_timing_n
        )
        report.timings["B, empty policy, after the load"] = store_timings(
            database_url, data_dir, key_b, args.big_timing_n
        )
        for t in (a, b):
            load(t, args, body_file, args.warmup, loadgen)
        for i in range(args.rounds):
            rows_now = db.one("SELECT count(*) FROM signatures")[0]
            measure_run(
                a, f"A, {args.big_rules:,} rules, big ledger ({i + 1})", "big", args.big_rules
            )
            rows_now = db.one("SELECT count(*) FROM signatures")[0]
            measure_run(b, f"B, empty policy, big ledger ({i + 1})", "empty-after", 1)
    finally:
        db.close()
    if a.proc.poll() is not None:
        raise SystemExit(f"{name} died during the run:\n{tail(a.log_path)}")
    stop(a.proc)
    return report


def run_big_state(args: argparse.Namespace, workdir: Path) -> None:
    loadgen = pick_loadgen(args.loadgen)
    loadgen_desc = f"`wrk -t{args.threads}`" if loadgen == "wrk" else "bench/loadgen.py"
    body = request_body_bytes()
    body_file = workdir / "body.json"
    body_file.write_bytes(body)
    reports = []
    reports.append(big_state_backend("sqlite", args, workdir, loadgen, body, body_file, None))
    if args.postgres:
        with postgres_schema(args.postgres_url) as schema:
            try:
                reports.append(
                    big_state_backend(
                        "postgres",
                        args,
                        workdir,
                        loadgen,
                        body,
                        body_file,
                        (args.postgres_url, schema),
                    )
                )
            finally:
                stop_all()  # before the schema is dropped
    verdicts = [report_big_state(r, args, loadgen_desc) for r in reports]
    for note in POLICY_NOTE[:1]:
        print(f"\nBoth accounts start from the {note}; A then gets the big policy.")
    print(
        f"\n**Acceptance check** (big state within {WITHIN:.0%} of the empty-policy req/s): "
        + ", ".join(
            f"{r.backend} {'pass' if ok else 'FAIL'}"
            for r, ok in zip(reports, verdicts, strict=True)
        )
    )
    bad = sum(r.result["non2xx"] for rep in reports for r in rep.runs)
    if bad:
        raise SystemExit(f"{bad} non-2xx answers from our endpoint during the run")
