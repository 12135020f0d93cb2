"""Signing benchmark: in-process signing cost, HTTP throughput and scale-out, in one run.

    .venv/bin/python bench/sign.py                 # ~2.5 min; `make bench` runs exactly this
    .venv/bin/python bench/sign.py --no-postgres   # a machine without PostgreSQL
    .venv/bin/python bench/sign.py --skip-in-process --big-state [--no-postgres]
        # 10,000 policy rules + a 1,000,000-row ledger vs an empty policy (~1.5 min per database)
    .venv/bin/python bench/sign.py --help

Everything runs in one invocation so the ratios compare numbers taken minutes apart on the
same (noisy, shared, 2-core) machine. Every request is a live payment (Base mainnet terms, no
sandbox header): the caps are checked and reserved each time.

0. The summary: req/s, share and p99 of the ceiling, SQLite, PostgreSQL and --workers
   processes on each; what a lone request adds over the ceiling's round trip; the goals.
1. In process, one core: per-signature µs for eth-account, our full path, our signing alone,
   the bare libsecp256k1 floor, and the x402 SDK client signing locally.
2. Over HTTP on 127.0.0.1 (wrk, or bench/loadgen.py without it): our ``POST
   /wallets/signatures`` against a bare Starlette endpoint served the same way (the ceiling).
3. Sequential single-request latency of our endpoint, against the SDK's local signing time.

``--big-state`` replaces 0, 2 and 3 with the acceptance check "with a policy of 10,000 rules
and a ledger of 1,000,000 signatures, the signing benchmark stays within 10% of the
empty-policy figure": our endpoint with an empty policy, then the same server and database
after loading that state, against a second empty-policy account on the big ledger.

It prints markdown tables on stdout (progress goes to stderr). It talks only to 127.0.0.1, uses
a throwaway data directory (and throwaway PostgreSQL schemas), and stops every process it
starts, also on Ctrl-C and errors. See bench/README.md for what each row means.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, Python puts bench/ itself on sys.path, not the repository root; the
# modules beside this one are imported as the package `bench`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import contextlib
import io
import os
import shutil
import signal
import tempfile
import time

from bench.big_state import run_big_state
from bench.http_run import measure_http, report_run
from bench.in_process import in_process
from bench.processes import stop_all
from bench.progress import log
from bench.report import machine_line, report_in_process

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--postgres",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run our endpoint on PostgreSQL, with one and with --workers processes "
        "(default; --no-postgres on a machine without one)",
    )
    p.add_argument(
        "--sqlite-only", dest="postgres", action="store_false", help="the same as --no-postgres"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="`paysign serve --workers N` of the multi-process runs (2; 1 skips them)",
    )
    p.add_argument(
        "--accounts",
        type=int,
        default=1,
        help="accounts the HTTP load pays from, each request the next one's key (1: a batch "
        "reads one holder, opens one key and reserves in one account's windows, the best case "
        "for group commit; wrk only)",
    )
    p.add_argument(
        "--many-accounts",
        type=int,
        default=16,
        help="also run one `serve` on each database with the load spread over this many "
        "accounts, as in production, where a batch's requests come from different payers "
        "(default 16; 1 skips them; with --accounts 1 and wrk only)",
    )
    p.add_argument(
        "--multi-sqlite",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run --workers processes on one SQLite file (default)",
    )
    p.add_argument(
        "--postgres-url",
        default=os.environ.get("PAYSIGN_BENCH_POSTGRES_URL", DEFAULT_PG_URL),
        help=f"libpq URL of a database where a schema may be created (default {DEFAULT_PG_URL})",
    )
    p.add_argument("--duration", type=float, default=8.0, help="seconds per HTTP measurement (8)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring (2)")
    p.add_argument("--rounds", type=int, default=2, help="alternating ceiling/ours rounds (2)")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument(
        "--threads", type=int, default=1, help="wrk threads (1: the server gets the other core)"
    )
    p.add_argument(
        "--loadgen",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="auto: wrk when installed, else bench/loadgen.py",
    )
    p.add_argument(
        "--python-client",
        choices=["raw", "httpx"],
        default="raw",
        help="client of the python load generator (raw asyncio streams or httpx)",
    )
    p.add_argument("--sequential", type=int, default=500, help="requests in the latency test (500)")
    p.add_argument("--repeats", type=int, default=7, help="in-process repeats per path (7)")
    p.add_argument("--repeat-seconds", type=float, default=0.15, help="length of one repeat (0.15)")
    p.add_argument(
        "--cpu",
        type=int,
        default=None,
        help="core for the in-process loops (default: the highest; -1: no pinning)",
    )
    p.add_argument(
        "--big-state",
        action="store_true",
        help="instead of the HTTP tables: our endpoint with an empty policy, then with "
        "--big-rules rules and a --big-ledger-row ledger (~3 min; +~3 min with --postgres)",
    )
    p.add_argument("--big-rules", type=int, default=10_000, help="rules of the big policy")
    p.add_argument("--big-ledger", type=int, default=1_000_000, help="rows of the big ledger")
    p.add_argument("--big-accounts", type=int, default=1_000, help="other accounts in it")
    p.add_argument(
        "--big-timing-n", type=int, default=2000, help="calls per in-process store timing"
    )
    p.add_argument(
        "--inline-signing",
        action="store_true",
        help="also run our SQLite endpoint with every signature made on the event loop "
        "(PAYSIGN_SIGNER_PROCESS=false), in the same rounds",
    )
    p.add_argument("--skip-in-process", action="store_true")
    p.add_argument("--skip-http", action="store_true")
    p.add_argument(
        "--profile",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after the measurements, sample one of our servers with py-spy under load",
    )
    p.add_argument(
        "--profile-target",
        default="sqlite",
        help="the server --profile samples: sqlite (default), postgres, or a multi-process "
        "run's name",
    )
    p.add_argument("--profile-top", type=int, default=15)
    p.add_argument(
        "--cpu-breakdown",
        type=float,
        default=0,
        metavar="SECONDS",
        help="also sample the ceiling and our SQLite server with perf (needs linux-perf)",
    )
    p.add_argument("--py-spy", default=None, help="path of the py-spy binary")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, db)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Explicit SIGINT too: a shell starting us in the background would have it ignored.
    signal.signal(signal.SIGINT, _raise_interrupt)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    workdir = Path(tempfile.mkdtemp(prefix="paysign-bench-"))
    started = time.monotonic()
    loadgen_desc = "wrk" if shutil.which("wrk") and args.loadgen != "python" else "bench/loadgen.py"
    try:
        print("## paysign signing benchmark\n")
        print(machine_line(loadgen_desc))
        by = None
        in_process_text = ""
        if not args.skip_in_process:
            timings, pinning = in_process(args)
            # Held back: the HTTP run's summary comes first.
            with contextlib.redirect_stdout(io.StringIO()) as table:
                by = report_in_process(timings, pinning)
            in_process_text = table.getvalue()
        if args.big_state or args.skip_http:
            print(in_process_text, end="")
            sys.stdout.flush()
        if args.big_state:
            run_big_state(args, workdir)
        elif not args.skip_http:
            try:
                run = measure_http(args, workdir)
            except BaseException:
                print(in_process_text, end="")
                raise
            report_run(run, args, by, in_process_text)
        print(f"\n_Total run time {time.monotonic() - started:.0f} s._")
        return 0
    except KeyboardInterrupt:
        log("interrupted; stopping child processes")
        return 130
    finally:
        stop_all()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
