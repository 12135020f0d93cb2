"""The default HTTP run: our servers against the ceiling in alternating rounds, then latency."""

from __future__ import annotations

import argparse
import contextlib
import statistics
from dataclasses import dataclass
from pathlib import Path

from bench.http_load import describe_loadgen, load, pick_loadgen
from bench.pg_schema import postgres_schema, sqlalchemy_url
from bench.processes import stop, stop_all, tail
from bench.profiling import breakdown, profile
from bench.progress import log
from bench.report import report_http, report_sequential
from bench.request import request_body_bytes
from bench.sequential import (
    KeepAliveClient,
    interleaved_latency,
    sequential_latency_httpx,
    verify,
)
from bench.servers import Target, start_ceiling, start_paysign
from bench.summary import Measured, many_name, multi_name, summary_markdown


@dataclass
class HttpRun:
    """What the HTTP run measured, for the report."""

    targets: list[Target]
    ceiling: Target
    seq: dict[str, dict[str, float]]
    httpx_p50: float
    loadgen_desc: str
    profile_text: str | None
    breakdown_text: str | None


def _start_targets(
    args: argparse.Namespace,
    workdir: Path,
    stack: contextlib.ExitStack[bool | None],
    loadgen: str,
) -> list[Target]:
    """Our servers: SQLite first (the other rows' reference), then PostgreSQL, then N
    processes, then each database with the load over many accounts."""
    multi = args.workers > 1
    # Against the load from one account: the rows over many say what many payers cost.
    over_many = args.accounts == 1 and args.many_accounts > 1 and loadgen == "wrk"
    many = args.many_accounts if over_many else 0
    schemas: list[str] = []
    if args.postgres:  # first: an unreachable database stops the run before any server starts
        count = 1 + multi + bool(many)
        schemas = [stack.enter_context(postgres_schema(args.postgres_url)) for _ in range(count)]
        stack.callback(stop_all)  # runs before the schemas are dropped
    log("starting paysign (SQLite)")
    n = args.accounts
    targets = [start_paysign("sqlite", workdir, None, accounts=n)]
    if args.inline_signing:
        log("starting paysign (SQLite, PAYSIGN_SIGNER_PROCESS=false)")
        inline = {"PAYSIGN_SIGNER_PROCESS": "false"}
        targets.append(start_paysign("sqlite-inline", workdir, None, inline, accounts=n))
    if multi and args.multi_sqlite:
        log(f"starting paysign (SQLite, {args.workers} workers)")
        name = multi_name("sqlite", args.workers)
        targets.append(start_paysign(name, workdir, None, workers=args.workers, accounts=n))
    if schemas:
        log(f"starting paysign (PostgreSQL, schema {schemas[0]})")
        url = sqlalchemy_url(args.postgres_url, schemas[0])
        targets.append(start_paysign("postgres", workdir, url, accounts=n))
    if multi and schemas:
        log(f"starting paysign (PostgreSQL, {args.workers} workers, schema {schemas[1]})")
        url = sqlalchemy_url(args.postgres_url, schemas[1])
        name = multi_name("postgres", args.workers)
        targets.append(start_paysign(name, workdir, url, workers=args.workers, accounts=n))
    if many:
        log(f"starting paysign (SQLite, the load over {many} accounts)")
        targets.append(start_paysign(many_name("sqlite", many), workdir, None, accounts=many))
    if many and schemas:
        log(f"starting paysign (PostgreSQL, the load over {many} accounts, schema {schemas[-1]})")
        url = sqlalchemy_url(args.postgres_url, schemas[-1])
        targets.append(start_paysign(many_name("postgres", many), workdir, url, accounts=many))
    return targets


def measure_http(args: argparse.Namespace, workdir: Path) -> HttpRun:
    loadgen = pick_loadgen(args.loadgen)
    loadgen_desc = describe_loadgen(loadgen, args)
    log(f"load generator: {loadgen_desc}")
    body = request_body_bytes()
    body_file = workdir / "body.json"
    body_file.write_bytes(body)

    with contextlib.ExitStack() as stack:
        targets = _start_targets(args, workdir, stack, loadgen)
        sizes = {t.name: verify(t, body) for t in targets}
        log(f"verified: 200 with a paymentSignatureHeader ({sizes['sqlite']}-byte answers)")
        ceiling = start_ceiling(workdir, sizes["sqlite"])
        verify_ceiling = KeepAliveClient(ceiling.port, body, None)
        status, data = verify_ceiling.post()
        verify_ceiling.close()
        if status != 200 or len(data) != sizes["sqlite"]:
            raise SystemExit(f"ceiling answered {status} with {len(data)} bytes")

        for t in [ceiling, *targets]:
            log(f"warm-up {t.name} ({args.warmup:g} s)")
            load(t, args, body_file, args.warmup, loadgen)

        seq = interleaved_latency([*targets, ceiling], body, args.sequential)
        httpx_p50 = sequential_latency_httpx(targets[0], body, args.sequential)
        log(
            "sequential latency: " + ", ".join(f"{k} p50 {v['p50']:.0f} µs" for k, v in seq.items())
        )

        for i in range(args.rounds):
            for t in [ceiling, *targets]:
                result = load(t, args, body_file, args.duration, loadgen)
                t.runs.append(result)
                spread = result.get("connections_per_worker")
                log(
                    f"round {i + 1} {t.name}: {result['rps']:,.0f} req/s, "
                    f"p99 {result['p99_us']} µs, "
                    f"non-2xx {result['non2xx']}"
                    + (f", connections per worker {'/'.join(map(str, spread))}" if spread else "")
                )

        profile_text = None
        if args.profile > 0:
            profiled = next((t for t in targets if t.name == args.profile_target), targets[0])
            log(f"profiling {profiled.name} server with py-spy for {args.profile:g} s")
            profile_text = profile(profiled, args, body_file, loadgen, workdir)
        breakdown_text = None
        if args.cpu_breakdown > 0:
            breakdown_text = breakdown(ceiling, targets[0], args, body_file, loadgen, workdir)

        for t in [*targets, ceiling]:
            if t.proc.poll() is not None:
                raise SystemExit(f"{t.name} died during the run:\n{tail(t.log_path)}")
            stop(t.proc)

    return HttpRun(targets, ceiling, seq, httpx_p50, loadgen_desc, profile_text, breakdown_text)


def measured(run: HttpRun) -> dict[str, Measured]:
    """Each server's medians over the rounds and its lone-request p50, for the summary."""
    out = {}
    for t in [run.ceiling, *run.targets]:
        lone = run.seq[t.name]
        out[t.name] = Measured(
            rps=statistics.median(r["rps"] for r in t.runs),
            p99_us=statistics.median(r["p99_us"] for r in t.runs),
            lone_p50_us=lone["p50"],
            non2xx=sum(r["non2xx"] for r in t.runs) + int(lone["non2xx"]),
        )
    return out


def report_run(
    run: HttpRun, args: argparse.Namespace, by: dict[str, float] | None, in_process_text: str
) -> None:
    """The summary first, then table 1 (measured earlier) and the detailed tables."""
    print(
        f"\n### Summary ({args.connections} connections, median of {args.rounds} rounds; "
        "live payments on Base mainnet terms)\n"
    )
    print(summary_markdown(measured(run), args.workers, args.connections, args.many_accounts))
    print(in_process_text, end="")
    report_http(run.targets, run.ceiling, run.loadgen_desc, args)
    report_sequential(run.seq, run.httpx_p50, by, args.sequential)
    if run.profile_text:
        seconds = f"{args.profile:g} s"
        print(f"\n### Profile of our {args.profile_target} server under load (py-spy, {seconds})\n")
        print(run.profile_text)
    if run.breakdown_text:
        print(f"\n### Server CPU by library (perf, {args.cpu_breakdown:g} s of load each)\n")
        print(run.breakdown_text)
    bad = sum(r["non2xx"] for t in run.targets for r in t.runs)
    bad += sum(int(s["non2xx"]) for name, s in run.seq.items() if name != "ceiling")
    if bad:
        raise SystemExit(f"{bad} non-2xx answers from our endpoint during the run")
