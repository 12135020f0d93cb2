"""The default HTTP run: our servers against the ceiling in alternating rounds, then latency."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from bench.http_load import describe_loadgen, load, pick_loadgen
from bench.pg_schema import postgres_schema, sqlalchemy_url
from bench.processes import stop, stop_all, tail
from bench.profiling import breakdown, profile
from bench.progress import log
from bench.report import report_http, report_sequential
from bench.request import request_body_bytes
from bench.sequential import KeepAliveClient, sequential_latency, sequential_latency_httpx, verify
from bench.servers import Target, start_ceiling, start_paysign


def run_http(args: argparse.Namespace, workdir: Path, by: dict[str, float] | None) -> None:
    loadgen = pick_loadgen(args.loadgen)
    loadgen_desc = describe_loadgen(loadgen, args)
    log(f"load generator: {loadgen_desc}")
    body = request_body_bytes()
    body_file = workdir / "body.json"
    body_file.write_bytes(body)

    targets: list[Target] = []
    with contextlib.ExitStack() as stack:
        log("starting paysign (SQLite)")
        targets.append(start_paysign("sqlite", workdir, None))
        if args.inline_signing:
            log("starting paysign (SQLite, PAYSIGN_SIGNER_PROCESS=false)")
            inline = {"PAYSIGN_SIGNER_PROCESS": "false"}
            targets.append(start_paysign("sqlite-inline", workdir, None, inline))
        if args.postgres:
            schema = stack.enter_context(postgres_schema(args.postgres_url))
            stack.callback(stop_all)  # runs before the schema is dropped
            log(f"starting paysign (PostgreSQL, schema {schema})")
            targets.append(
                start_paysign("postgres", workdir, sqlalchemy_url(args.postgres_url, schema))
            )
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

        seq = {}
        for t in [*targets, ceiling]:
            seq[t.name] = sequential_latency(t, body, args.sequential)
        httpx_p50 = sequential_latency_httpx(targets[0], body, args.sequential)
        log(
            "sequential latency: " + ", ".join(f"{k} p50 {v['p50']:.0f} µs" for k, v in seq.items())
        )

        for i in range(args.rounds):
            for t in [ceiling, *targets]:
                result = load(t, args, body_file, args.duration, loadgen)
                t.runs.append(result)
                log(
                    f"round {i + 1} {t.name}: {result['rps']:,.0f} req/s, "
                    f"p99 {result['p99_us']} µs, "
                    f"non-2xx {result['non2xx']}"
                )

        profile_text = None
        if args.profile > 0:
            log(f"profiling sqlite server with py-spy for {args.profile:g} s")
            profile_text = profile(targets[0], args, body_file, loadgen, workdir)
        breakdown_text = None
        if args.cpu_breakdown > 0:
            breakdown_text = breakdown(ceiling, targets[0], args, body_file, loadgen, workdir)

        for t in [*targets, ceiling]:
            if t.proc.poll() is not None:
                raise SystemExit(f"{t.name} died during the run:\n{tail(t.log_path)}")
            stop(t.proc)

    report_http(targets, ceiling, loadgen_desc, args)
    report_sequential(seq, httpx_p50, by, args.sequential)
    if profile_text:
        print(f"\n### Profile of our SQLite server under load (py-spy, {args.profile:g} s)\n")
        print(profile_text)
    if breakdown_text:
        print(f"\n### Server CPU by library (perf, {args.cpu_breakdown:g} s of load each)\n")
        print(breakdown_text)
    bad = sum(r["non2xx"] for t in targets for r in t.runs)
    if bad:
        raise SystemExit(f"{bad} non-2xx answers from our endpoint during the run")
