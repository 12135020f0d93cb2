"""Instructions per signing request in process, counted by callgrind: a figure that the
machine's neighbours do not move.

    .venv/bin/python bench/app_instructions.py                       # this tree (~2 min)
    .venv/bin/python bench/app_instructions.py --baseline-src /tmp/base/src   # and another (~4)

On this shared 2-core machine req/s moves by a factor of three between hours, so a change
worth a few per cent of the CPU is lost in the noise of ``bench/sign.py``. Here the ASGI app
that ``paysign serve`` builds answers live payments (the same body and policy as
``bench/sign.py``, SQLite, the signer process on) in rounds of ``--concurrency`` requests at
once on uvloop, called directly: everything of a request but uvicorn's HTTP parsing and the
kernel's sockets. ``valgrind --tool=callgrind`` counts the server process's instructions (not
the signer's: it is not traced; only the event loop's thread); two runs that differ only in
their number of rounds give the instructions of one request, start-up and warm-up left out.
Twelve counts of one tree ranged from 438k to 457k per request (±2%: when the signer's and the
log flusher's answers come back still changes a little of what the loop does), where req/s
moves by a factor of three between hours; so it tells apart changes of a few per cent (the
request line's: 476k to 487k before, three counts). It weighs every instruction alike (a system
call, a cache miss...): read it beside ``bench/sign.py``, not for it.

With ``--baseline-src`` the same is run for another checkout's ``src`` (``git worktree add``).
Each tree has an account of its own, and each of its two runs a copy of that account's data
directory: the runs go two at a time, and two processes on one database would read each other's
commits.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from bench.accounts import bench_account
from bench.paysign_cli import paysign_env
from bench.progress import log
from bench.summary import TIMES

#: Rounds run before the counted ones in every run: imports, caches, the signer started.
WARM_ROUNDS = 30
_TOTAL = re.compile(rb"^totals: (\d+)$", re.MULTILINE)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline-src", type=Path, help="another tree's src/ to count beside ours")
    p.add_argument("--concurrency", type=int, default=32, help="requests at once (32)")
    p.add_argument("--rounds", type=int, default=60, help="rounds told apart (60)")
    p.add_argument(
        "--check",
        action="store_true",
        help="drive the app a few rounds without valgrind, to see that every request signs",
    )
    # The child's: the key comes in BENCH_API_KEY (as to bench/sign.lua), never on the command
    # line, where `ps` and valgrind's own banner would show it.
    p.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--counted-rounds", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def drive(args: argparse.Namespace) -> None:
    """The child: the app built from ``PAYSIGN_*``, warmed up, then ``--counted-rounds`` of
    ``--concurrency`` requests paid with ``BENCH_API_KEY``."""
    import asyncio

    import uvloop
    from starlette.types import Message

    from bench.request import PATH, request_body_bytes
    from paysign.app import create_app
    from paysign.bootstrap import build_runtime
    from paysign.config import Settings
    from paysign.logging import configure_logging
    from paysign.server_start import tune_gc_for_serving

    configure_logging("info")
    app = create_app(build_runtime(Settings()))
    body = request_body_bytes()
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {os.environ['BENCH_API_KEY']}".encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": PATH,
        "raw_path": PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    statuses: dict[int, int] = {}

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses[message["status"]] = statuses.get(message["status"], 0) + 1

    async def rounds(n: int) -> None:
        for _ in range(n):
            requests = (app(dict(scope), receive, send) for _ in range(args.concurrency))
            await asyncio.gather(*requests)

    async def main() -> None:
        async with app.router.lifespan_context(app):
            await rounds(WARM_ROUNDS)
            await asyncio.sleep(1.0)  # the signer process is up: batches go to it from now on
            tune_gc_for_serving()
            await rounds(args.counted_rounds)

    uvloop.install()
    asyncio.run(main())
    if set(statuses) != {200}:
        raise SystemExit(f"not every request was signed: {statuses}")


def run_driver(
    env: dict[str, str], rounds: int, concurrency: int, *, under: Sequence[str] = ()
) -> None:
    """The driver (``--drive``) in a child, ``under`` a tool; exits when it fails."""
    cmd = [*under, sys.executable, __file__, "--drive", "--counted-rounds", str(rounds)]
    cmd += ["--concurrency", str(concurrency)]
    ran = subprocess.run(cmd, env=env, capture_output=True, timeout=3600, check=False)
    if ran.returncode != 0:
        raise SystemExit(f"the driver failed ({ran.returncode}):\n{ran.stderr[-3000:]!r}")


def count(env: dict[str, str], rounds: int, concurrency: int, out: Path) -> int:
    """The instructions of one run of ``rounds`` counted rounds."""
    valgrind = ["valgrind", "--tool=callgrind", "--separate-threads=yes"]
    run_driver(env, rounds, concurrency, under=[*valgrind, f"--callgrind-out-file={out}"])
    # The event loop's thread only: the others' work is start-up's (the password hasher's
    # lanes) or follows the run's wall time (the WAL checkpoints, once a second), not its
    # requests.
    return instructions_counted(Path(f"{out}-01").read_bytes())


def instructions_counted(callgrind_out: bytes) -> int:
    r"""The total of a callgrind output file (one thread's, with ``--separate-threads``).

    >>> instructions_counted(b"events: Ir\nfn=(1) main\n5 12\nsummary: 9907470\ntotals: 9907470\n")
    9907470
    >>> instructions_counted(b"events: Ir\n")
    Traceback (most recent call last):
    SystemExit: callgrind wrote no total
    """
    found = _TOTAL.search(callgrind_out)
    if found is None:
        raise SystemExit("callgrind wrote no total")
    return int(found.group(1))


def with_account(workdir: Path, name: str, src: Path | None = None) -> tuple[Path, dict[str, str]]:
    """A data directory of its own with a bench account, and the environment that pays from
    it (``src``: the tree whose ``paysign`` makes the account and serves)."""
    data_dir = workdir / name
    data_dir.mkdir(mode=0o700)
    env = paysign_env(data_dir, None)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    _, env["BENCH_API_KEY"] = bench_account(env, workdir)
    return data_dir, env


def check(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="paysign-instructions-") as tmp:
        _, env = with_account(Path(tmp), "check")
        run_driver(env, 2, args.concurrency)
    print(f"the driver signed all {(WARM_ROUNDS + 2) * args.concurrency} requests")


def per_request(
    name: str, src: Path | None, args: argparse.Namespace, workdir: Path, pool: ThreadPoolExecutor
) -> tuple[str, float]:
    data_dir, env = with_account(workdir, name, src)

    def counted(rounds: int) -> int:
        copy = shutil.copytree(data_dir, workdir / f"{name}-{rounds}")
        run_env = {**env, "PAYSIGN_DATA_DIR": str(copy)}
        return count(run_env, rounds, args.concurrency, workdir / f"{name}-{rounds}.callgrind")

    log(f"{name}: two counted runs under callgrind")
    short, long = pool.map(counted, (1, 1 + args.rounds))
    return name, (long - short) / (args.rounds * args.concurrency)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.drive:
        drive(args)
        return
    if args.check:
        check(args)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    workdir = Path(tempfile.mkdtemp(prefix="paysign-instructions-"))
    try:
        trees: list[tuple[str, Path | None]] = [("this tree", None)]
        if args.baseline_src is not None:
            trees.insert(0, ("baseline", args.baseline_src.resolve()))
        with ThreadPoolExecutor(2) as pool:
            counts = [per_request(name, src, args, workdir, pool) for name, src in trees]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"### Instructions per signing request, in process ({args.concurrency} at once, "
        f"{args.rounds} rounds told apart, callgrind)\n"
    )
    print("| tree | instructions / request | against the first |")
    print("|---|---:|---:|")
    first = counts[0][1]
    for name, value in counts:
        print(f"| {name} | {value / 1000:,.1f}k | {value / first:.3f}{TIMES} |")


if __name__ == "__main__":
    main()
