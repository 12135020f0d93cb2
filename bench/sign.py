"""Signing benchmark: in-process signing cost and HTTP throughput, in one run.

    .venv/bin/python bench/sign.py              # ~1 min; `make bench` runs exactly this
    .venv/bin/python bench/sign.py --postgres   # also our endpoint on PostgreSQL (~+25 s)
    .venv/bin/python bench/sign.py --help

Everything runs in one invocation so the ratios compare numbers taken minutes apart on the
same (noisy, shared, 2-core) machine:

1. In process, one core: per-signature µs for eth-account, our full path, our signing alone,
   the bare libsecp256k1 floor, and the x402 SDK client signing locally.
2. Over HTTP on 127.0.0.1 (wrk, or bench/loadgen.py without it): our ``POST
   /wallets/signatures`` against a bare Starlette endpoint served the same way (the ceiling).
3. Sequential single-request latency of our endpoint, against the SDK's local signing time.

It prints markdown tables on stdout (progress goes to stderr). It talks only to 127.0.0.1, uses
a throwaway data directory (and, with --postgres, a throwaway schema), and stops every process
it starts, also on Ctrl-C and errors. See bench/README.md for what each row means.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PYTHON = sys.executable
HOST = "127.0.0.1"
PATH = "/wallets/signatures"

USDC_SEPOLIA = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
PAYMENT_REQUIRED: dict[str, Any] = {
    "x402Version": 2,
    "resource": {
        "url": "https://api.example.com/weather",
        "description": "weather",
        "mimeType": "application/json",
    },
    "accepts": [
        {
            "scheme": "exact",
            "network": "eip155:84532",
            "amount": "10000",
            "asset": USDC_SEPOLIA,
            "payTo": PAY_TO,
            "maxTimeoutSeconds": 60,
            "extra": {"name": "USDC", "version": "2"},
        }
    ],
}
REQUEST_BODY: dict[str, Any] = {
    "sellerUrl": "https://api.example.com/weather?city=paris",
    "paymentRequired": PAYMENT_REQUIRED,
}
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
PROFILE_RATE = 250  # py-spy samples per second


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# 1. In-process signing cost
# --------------------------------------------------------------------------------------------


@dataclass
class Timing:
    label: str
    what: str
    samples_us: list[float]
    loops: int

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples_us)


def _time_loop(fn: Callable[[], object], loops: int) -> float:
    perf = time.perf_counter_ns
    started = perf()
    for _ in range(loops):
        fn()
    return (perf() - started) / loops / 1000


def measure(
    fn: Callable[[], object], *, repeats: int, repeat_seconds: float
) -> tuple[list[float], int]:
    """Median-able samples (µs per call): ``repeats`` loops of about ``repeat_seconds`` each."""
    for _ in range(3):
        fn()  # warm caches, lazy imports, lru_caches
    loops = 1
    while True:
        elapsed_s = _time_loop(fn, loops) * loops / 1e6
        if elapsed_s >= 0.02:
            break
        loops *= 4
    loops = max(1, int(loops * repeat_seconds / elapsed_s))
    return [_time_loop(fn, loops) for _ in range(repeats)], loops


@contextlib.contextmanager
def pinned_to_one_core(cpu: int | None) -> Iterator[str]:
    if not hasattr(os, "sched_setaffinity"):
        yield "not pinned (no sched_setaffinity)"
        return
    before = os.sched_getaffinity(0)
    target = max(before) if cpu is None else cpu
    if cpu == -1:
        yield "not pinned (--cpu -1)"
        return
    os.sched_setaffinity(0, {target})
    try:
        yield f"pinned to CPU {target}"
    finally:
        os.sched_setaffinity(0, before)


def in_process(args: argparse.Namespace) -> tuple[list[Timing], str]:
    import coincurve
    import eth_account
    import x402
    from eth_account.messages import encode_typed_data
    from x402.http.utils import encode_payment_signature_header
    from x402.mechanisms.evm.exact import register_exact_evm_client

    from paysign.bootstrap import asset_registry
    from paysign.config import Settings
    from paysign.protocol import (
        PrivateKeySigner,
        domain_separator,
        parse_signature_request,
        sign_payment,
        transfer_authorization_digest,
    )

    registry = asset_registry(Settings())
    private_key = secrets.token_bytes(32)
    account = eth_account.Account.from_key(private_key)
    signer = PrivateKeySigner(private_key)
    terms = parse_signature_request(REQUEST_BODY, registry).terms
    now = int(time.time())
    valid_before = now + 60

    domain = {
        "name": "USDC",
        "version": "2",
        "chainId": 84532,
        "verifyingContract": USDC_SEPOLIA,
    }
    types = {
        "TransferWithAuthorization": [
            {"name": "from", "type": "address"},
            {"name": "to", "type": "address"},
            {"name": "value", "type": "uint256"},
            {"name": "validAfter", "type": "uint256"},
            {"name": "validBefore", "type": "uint256"},
            {"name": "nonce", "type": "bytes32"},
        ]
    }
    message = {
        "from": account.address,
        "to": PAY_TO,
        "value": 10000,
        "validAfter": 0,
        "validBefore": valid_before,
    }

    # Correctness first: our signature must be byte-identical to eth-account's, and the SDK
    # client must produce a header, or the timings compare different work.
    nonce = secrets.token_bytes(32)
    ours = sign_payment(terms, signer, now=now, nonce=nonce)
    theirs = account.sign_typed_data(domain, types, {**message, "nonce": nonce})
    if ours.payload["payload"]["signature"] != "0x" + bytes(theirs.signature).hex():
        raise SystemExit("our signature differs from eth-account's: refusing to benchmark")
    recovered = eth_account.Account.recover_message(
        encode_typed_data(domain, types, {**message, "nonce": nonce}),
        signature=bytes(theirs.signature),
    )
    if recovered != account.address:
        raise SystemExit("signature does not recover to the signer")

    client = x402.x402ClientSync()
    register_exact_evm_client(client, account)
    if hasattr(client, "set_spend_controls"):
        client.set_spend_controls(False)
    payment_required = x402.PaymentRequired.model_validate(PAYMENT_REQUIRED)
    sdk_header = encode_payment_signature_header(client.create_payment_payload(payment_required))
    json.loads(base64.b64decode(sdk_header))

    digest = transfer_authorization_digest(
        domain_separator("USDC", "2", 84532, bytes.fromhex(USDC_SEPOLIA[2:])),
        signer.address,
        bytes.fromhex(PAY_TO[2:]),
        10000,
        0,
        valid_before,
        nonce,
    )
    cached_key = coincurve.PrivateKey(private_key)
    token_bytes = secrets.token_bytes

    def eth_account_path() -> object:
        return eth_account.Account.sign_typed_data(
            private_key, domain, types, {**message, "nonce": token_bytes(32)}
        )

    def ours_full() -> object:
        request = parse_signature_request(REQUEST_BODY, registry)
        return sign_payment(
            request.terms,
            PrivateKeySigner(private_key),
            now=int(time.time()),
            nonce=token_bytes(32),
        )

    def ours_sign_only() -> object:
        return sign_payment(terms, signer, now=int(time.time()), nonce=token_bytes(32))

    def ours_sign_new_key() -> object:
        return sign_payment(
            terms, PrivateKeySigner(private_key), now=int(time.time()), nonce=token_bytes(32)
        )

    def floor() -> object:
        return cached_key.sign_recoverable(digest, hasher=None)

    def sdk_local() -> object:
        return encode_payment_signature_header(client.create_payment_payload(payment_required))

    def sdk_local_with_parse() -> object:
        parsed = x402.PaymentRequired.model_validate(PAYMENT_REQUIRED)
        return encode_payment_signature_header(client.create_payment_payload(parsed))

    cases = [
        (
            "(a)",
            "eth-account `Account.sign_typed_data` (TransferWithAuthorization)",
            eth_account_path,
        ),
        (
            "(b)",
            "ours, full: `parse_signature_request` + `PrivateKeySigner(key)` + `sign_payment`",
            ours_full,
        ),
        (
            "(b')",
            "ours, signing only: `sign_payment` on parsed terms, cached signer",
            ours_sign_only,
        ),
        (
            "(b'')",
            "ours, `sign_payment` on parsed terms, `PrivateKeySigner` built per call",
            ours_sign_new_key,
        ),
        (
            "(c)",
            "floor: cached coincurve `PrivateKey.sign_recoverable(digest, hasher=None)`",
            floor,
        ),
        (
            "(d)",
            "x402 SDK client, local: `create_payment_payload` + `encode_payment_signature_header`",
            sdk_local,
        ),
        ("(d')", "(d) plus `PaymentRequired.model_validate` of the 402 body", sdk_local_with_parse),
    ]
    timings = []
    with pinned_to_one_core(args.cpu) as pinning:
        for label, what, fn in cases:
            samples, loops = measure(fn, repeats=args.repeats, repeat_seconds=args.repeat_seconds)
            timings.append(Timing(label, what, samples, loops))
            log(
                f"in-process {label}: {statistics.median(samples):.1f} µs "
                f"({loops} loops x {args.repeats})"
            )
    return timings, pinning


# --------------------------------------------------------------------------------------------
# Process management: every child is recorded here and stopped in `stop_all`.
# --------------------------------------------------------------------------------------------

CHILDREN: list[subprocess.Popen[bytes]] = []


def spawn(
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    capture: bool = False,
) -> subprocess.Popen[bytes]:
    stdout: Any = subprocess.PIPE if capture else subprocess.DEVNULL
    stderr: Any = subprocess.DEVNULL
    if log_path is not None:
        handle = log_path.open("ab")
        stderr = handle
        if not capture:
            stdout = handle
    # A new session: Ctrl-C reaches only us, and we stop the children in order.
    proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr, start_new_session=True)
    CHILDREN.append(proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()  # by pid: only the process we started
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    if proc in CHILDREN:
        CHILDREN.remove(proc)


def stop_all() -> None:
    for proc in list(reversed(CHILDREN)):
        with contextlib.suppress(Exception):
            stop(proc)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def process_cpu_seconds(pid: int) -> float | None:
    """user + system CPU time of a process (Linux /proc), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_healthy(
    proc: subprocess.Popen[bytes], port: int, log_path: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}:\n{tail(log_path)}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection(HOST, port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                conn.close()
                return
            conn.close()
        time.sleep(0.1)
    raise SystemExit(f"server on port {port} not healthy after {timeout} s:\n{tail(log_path)}")


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --------------------------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    port: int
    api_key: str | None
    proc: subprocess.Popen[bytes]
    log_path: Path
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{PATH}"


def paysign_cmd() -> list[str]:
    script = Path(PYTHON).parent / "paysign"
    if script.exists():
        return [str(script)]
    return [PYTHON, "-c", "from paysign.cli import main; main()"]


def paysign_env(data_dir: Path, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    env["PAYSIGN_DATA_DIR"] = str(data_dir)  # also where the master key file goes
    if database_url is not None:
        env["PAYSIGN_DATABASE_URL"] = database_url
    return env


def admin(env: dict[str, str], *argv: str) -> dict[str, Any]:
    proc = spawn([*paysign_cmd(), "admin", *argv], env=env, capture=True)
    out, _ = proc.communicate(timeout=120)
    CHILDREN.remove(proc)
    if proc.returncode != 0:
        raise SystemExit(f"paysign admin {argv[0]} failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result


# The default policy would refuse api.example.com (pending approval) and stop at the default
# daily cap after ~1000 requests: allow the seller and raise the caps, so the policy and cap
# checks run on every request but never refuse.
BENCH_POLICY: dict[str, Any] = {
    "approval": "openEcosystem",
    "ecosystems": {"premium": True, "standard": True, "openEcosystem": True},
    "caps": {"perPayment": 1_000_000, "daily": 10**15, "monthly": 10**15},
    "allow": ["api.example.com"],
    "deny": [],
}
POLICY_NOTE: list[str] = []


def open_policy(env: dict[str, str], email: str, workdir: Path) -> None:
    """``paysign admin set-policy`` with BENCH_POLICY (skipped on a tree without policies)."""
    help_proc = spawn([*paysign_cmd(), "admin", "--help"], env=env, capture=True)
    help_text, _ = help_proc.communicate(timeout=60)
    CHILDREN.remove(help_proc)
    if b"set-policy" not in help_text:
        note = "no policy layer in this tree"
    else:
        policy_file = workdir / "policy.json"
        policy_file.write_text(json.dumps(BENCH_POLICY))
        admin(env, "set-policy", "--email", email, "--file", str(policy_file))
        note = (
            "policy set by `paysign admin set-policy`: allow `api.example.com`, caps perPayment "
            "1 USDC, daily/monthly 10^9 USDC (checked and reserved on every request, never "
            "binding)"
        )
    if note not in POLICY_NOTE:
        POLICY_NOTE.append(note)


def start_paysign(name: str, workdir: Path, database_url: str | None) -> Target:
    data_dir = workdir / name
    data_dir.mkdir(mode=0o700)
    env = paysign_env(data_dir, database_url)
    email = f"bench-{secrets.token_hex(4)}@example.com"
    admin(env, "create-account", "--email", email, "--password", "benchmark password 1234")
    api_key = admin(env, "issue-key", "--email", email, "--expires-in-days", "1")["apiKey"]
    open_policy(env, email, workdir)
    port = free_port()
    log_path = workdir / f"{name}.log"
    proc = spawn(
        [*paysign_cmd(), "serve", "--host", HOST, "--port", str(port)], env=env, log_path=log_path
    )
    wait_healthy(proc, port, log_path)
    return Target(name, port, api_key, proc, log_path)


def start_ceiling(workdir: Path, response_bytes: int) -> Target:
    port = free_port()
    log_path = workdir / "ceiling.log"
    proc = spawn(
        [
            PYTHON,
            str(BENCH_DIR / "ceiling_app.py"),
            "--host",
            HOST,
            "--port",
            str(port),
            "--response-bytes",
            str(response_bytes),
        ],
        log_path=log_path,
    )
    wait_healthy(proc, port, log_path)
    return Target("ceiling", port, None, proc, log_path)


class KeepAliveClient:
    """One keep-alive connection; minimal client cost for the sequential latency test."""

    def __init__(self, port: int, body: bytes, api_key: str | None) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=10)
        self.body = body
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def post(self) -> tuple[int, bytes]:
        self.conn.request("POST", PATH, body=self.body, headers=self.headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.conn.close()


def verify(target: Target, body: bytes) -> int:
    """A few real requests must sign; returns the size of a response body."""
    client = KeepAliveClient(target.port, body, target.api_key)
    try:
        size = 0
        nonces = set()
        for _ in range(3):
            status, data = client.post()
            if status != 200:
                raise SystemExit(f"{target.name}: expected 200, got {status}: {data[:300]!r}")
            answer = json.loads(data)
            payload = json.loads(base64.b64decode(answer["paymentSignatureHeader"]))
            signature = payload["payload"]["signature"]
            if not (signature.startswith("0x") and len(signature) == 132):
                raise SystemExit(f"{target.name}: no signature in the payment header")
            nonces.add(answer["nonce"])
            size = len(data)
        if len(nonces) != 3:
            raise SystemExit(f"{target.name}: nonces repeat")
        return size
    finally:
        client.close()


def sequential_latency(target: Target, body: bytes, n: int) -> dict[str, float]:
    client = KeepAliveClient(target.port, body, target.api_key)
    try:
        for _ in range(min(50, n)):
            client.post()
        lat = []
        bad = 0
        for _ in range(n):
            started = time.perf_counter_ns()
            status, _ = client.post()
            lat.append((time.perf_counter_ns() - started) / 1000)
            bad += not 200 <= status <= 299
    finally:
        client.close()
    lat.sort()
    return {
        "p50": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, int(0.99 * len(lat)))],
        "non2xx": bad,
        "n": n,
    }


def sequential_latency_httpx(target: Target, body: bytes, n: int) -> float:
    import httpx

    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {target.api_key}"}
    with httpx.Client(timeout=10) as client:
        for _ in range(min(50, n)):
            client.post(target.url, content=body, headers=headers)
        lat = []
        for _ in range(n):
            started = time.perf_counter_ns()
            client.post(target.url, content=body, headers=headers)
            lat.append((time.perf_counter_ns() - started) / 1000)
    return statistics.median(lat)


# --------------------------------------------------------------------------------------------
# Load generation
# --------------------------------------------------------------------------------------------


def pick_loadgen(choice: str) -> str:
    if choice == "wrk" and shutil.which("wrk") is None:
        raise SystemExit("--loadgen wrk: wrk is not installed (apt-get install -y wrk)")
    if choice == "auto":
        return "wrk" if shutil.which("wrk") else "python"
    return choice


def load(
    target: Target, args: argparse.Namespace, body_file: Path, seconds: float, loadgen: str
) -> dict[str, Any]:
    env = dict(os.environ)
    env["BENCH_BODY_FILE"] = str(body_file)
    env.pop("BENCH_API_KEY", None)
    if target.api_key:
        env["BENCH_API_KEY"] = target.api_key
    if loadgen == "wrk":
        # wrk takes whole seconds only.
        cmd = [
            "wrk",
            f"-t{args.threads}",
            f"-c{args.connections}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "5s",
            "-s",
            str(BENCH_DIR / "sign.lua"),
            target.url,
        ]
    else:
        cmd = [
            PYTHON,
            str(BENCH_DIR / "loadgen.py"),
            "--url",
            target.url,
            "--body-file",
            str(body_file),
            "--connections",
            str(args.connections),
            "--duration",
            f"{seconds:g}",
            "--client",
            args.python_client,
        ]
    cpu_before = process_cpu_seconds(target.proc.pid)
    proc = spawn(cmd, env=env, capture=True)
    try:
        out, _ = proc.communicate(timeout=seconds + 60)
    finally:
        stop(proc)
    cpu_after = process_cpu_seconds(target.proc.pid)
    for line in out.decode(errors="replace").splitlines():
        if line.startswith("BENCH_RESULT "):
            result: dict[str, Any] = json.loads(line[len("BENCH_RESULT ") :])
            result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
            if cpu_before is not None and cpu_after is not None and result["requests"]:
                result["cpu_us"] = (cpu_after - cpu_before) * 1e6 / result["requests"]
            return result
    raise SystemExit(f"load generator printed no result (exit {proc.returncode}):\n{out.decode()}")


# --------------------------------------------------------------------------------------------
# Profiling (optional): py-spy on our server while it is under load
# --------------------------------------------------------------------------------------------


def profile(
    target: Target, args: argparse.Namespace, body_file: Path, loadgen: str, workdir: Path
) -> str:
    """Sample our server with ``py-spy --gil`` while the load generator runs."""
    py_spy = args.py_spy or shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    if shutil.which(py_spy) is None:
        return "_(profiling skipped: py-spy not found; pass --py-spy PATH)_"
    raw = workdir / "profile.txt"
    # --gil: only samples of the thread holding the GIL, i.e. where the interpreter's one core
    # goes (idle worker threads and lock waits would otherwise swamp the picture).
    spy = spawn(
        [
            py_spy,
            "record",
            "--pid",
            str(target.proc.pid),
            "--duration",
            f"{args.profile:g}",
            "--rate",
            str(PROFILE_RATE),
            "--gil",
            "--format",
            "raw",
            "--output",
            str(raw),
            "--nonblocking",
        ],
        log_path=workdir / "py-spy.log",
    )
    time.sleep(0.5)
    load(target, args, body_file, args.profile + 1, loadgen)
    try:
        spy.wait(timeout=30)
    finally:
        stop(spy)
    if not raw.exists():
        return f"_(py-spy produced nothing: {tail(workdir / 'py-spy.log', 5)})_"
    return summarise_profile(raw, args.profile_top, int(PROFILE_RATE * args.profile))


def _frames(raw: Path) -> Iterator[tuple[list[str], int]]:
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield (
                [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))],
                int(count),
            )


def _frame_file(frame: str) -> str:
    # py-spy frames read "function (path/relative/to/sys.path/file.py:123)"
    return frame.rpartition(" (")[2].rstrip(")").rsplit(":", 1)[0]


def _package(frame: str) -> str:
    path = _frame_file(frame)
    if "/" in path:
        return path.split("/", 1)[0]
    return "stdlib" if path.endswith(".py") else path


def _function(frame: str) -> str:
    name, _, where = frame.rpartition(" (")
    return f"`{name}` ({where.rstrip(')').rsplit(':', 1)[0]})"


def summarise_profile(raw: Path, top: int, possible: int) -> str:
    """Collapsed stacks -> inclusive share of our own functions, leaf hotspots, packages."""
    own: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    samples = 0
    for frames, count in _frames(raw):
        if not frames:
            continue
        samples += count
        own[_function(frames[-1])] += count
        for name in {_function(f) for f in frames if _package(f) == "paysign"}:
            ours[name] += count
        packages[_package(frames[-1])] += count
    if not samples:
        return "_(no samples)_"

    def pct(n: int) -> str:
        return f"{100 * n / samples:.1f}"

    out = [
        f"{samples} samples with the GIL held, of about {possible} possible "
        f"(the GIL was held {100 * samples / max(1, possible):.0f}% of the time).",
        "",
        "Inclusive share of paysign's own functions:",
        "",
        "| % of GIL samples | paysign function (file) |",
        "|---:|---|",
    ]
    skip = ("paysign/cli.py", "`<module>`")
    mine = [(k, n) for k, n in ours.most_common() if not any(x in k for x in skip)]
    out += [f"| {pct(n)} | {k} |" for k, n in mine[:top]]
    out += ["", "Leaf (self) hotspots:", "", "| % of GIL samples | function (file) |", "|---:|---|"]
    out += [f"| {pct(n)} | {k} |" for k, n in own.most_common(top)]
    by_package = ", ".join(f"{k} {pct(n)}%" for k, n in packages.most_common(10))
    out += ["", f"Self time by package: {by_package}"]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Postgres schema
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_schema(base_url: str) -> Iterator[str]:
    import psycopg

    schema = f"paysign_bench_{secrets.token_hex(4)}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
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


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def ms(us: float) -> str:
    return f"{us / 1000:.2f} ms"


def goal(ok: bool) -> str:
    return "✅" if ok else "❌"


def report_in_process(timings: list[Timing], pinning: str) -> dict[str, float]:
    by = {t.label: t.median_us for t in timings}
    print(
        f"\n### 1. In-process signing cost "
        f"(median of {len(timings[0].samples_us)} repeats, {pinning})\n"
    )
    print("| path | µs / signature | signatures / s | spread (min-max µs) |")
    print("|---|---:|---:|---:|")
    for t in timings:
        print(
            f"| {t.label} {t.what} | {t.median_us:.1f} | {fmt_int(1e6 / t.median_us)} | "
            f"{min(t.samples_us):.1f}-{max(t.samples_us):.1f} |"
        )
    full, sign_only, floor = by["(b)"], by["(b')"], by["(c)"]
    print("\n| ratio | value | goal |")
    print("|---|---:|---|")
    print(
        f"| ours signing only / floor = (b')/(c) | {sign_only / floor:.2f}x | "
        f"≤ 1.5x {goal(sign_only / floor <= 1.5)} |"
    )
    print(
        f"| ours full path / floor = (b)/(c) | {full / floor:.2f}x | "
        f"≤ 1.5x {goal(full / floor <= 1.5)} |"
    )
    print(f"| eth-account / ours full = (a)/(b) | {by['(a)'] / full:.1f}x | |")
    print(f"| eth-account / ours signing only = (a)/(b') | {by['(a)'] / sign_only:.1f}x | |")
    print(f"| x402 SDK local / ours full = (d)/(b) | {by['(d)'] / full:.1f}x | |")
    return by


def report_http(
    targets: list[Target], ceiling: Target, loadgen_desc: str, args: argparse.Namespace
) -> None:
    rounds = len(ceiling.runs)
    print(
        f"\n### 2. HTTP throughput on 127.0.0.1 ({loadgen_desc}, {args.connections} connections, "
        f"{args.duration:g} s per run, {rounds} alternating rounds, median)\n"
    )
    print(
        "| server | req/s | p50 | p99 | server CPU / req | non-2xx | socket errors / timeouts "
        "| req/s per round | share of ceiling |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ceiling_rps = statistics.median(r["rps"] for r in ceiling.runs)
    for t in [ceiling, *targets]:
        rps = statistics.median(r["rps"] for r in t.runs)
        p50 = statistics.median(r["p50_us"] for r in t.runs)
        p99 = statistics.median(r["p99_us"] for r in t.runs)
        non2xx = sum(r["non2xx"] for r in t.runs)
        sock = sum(r["socket_errors"] for r in t.runs)
        tmo = sum(r["timeouts"] for r in t.runs)
        per_round = " / ".join(fmt_int(r["rps"]) for r in t.runs)
        share = rps / ceiling_rps
        share_text = (
            "100%" if t is ceiling else f"{100 * share:.0f}% (goal ≥ 40% {goal(share >= 0.4)})"
        )
        label = {
            "ceiling": "bare Starlette JSON endpoint (ceiling, `bench/ceiling_app.py`)",
            "sqlite": "ours `POST /wallets/signatures`, SQLite (embedded default)",
            "postgres": "ours `POST /wallets/signatures`, PostgreSQL",
        }[t.name]
        cpu = [r["cpu_us"] for r in t.runs if "cpu_us" in r]
        cpu_text = f"{statistics.median(cpu):.0f} µs" if cpu else "n/a"
        print(
            f"| {label} | {fmt_int(rps)} | {ms(p50)} | {ms(p99)} | {cpu_text} | {non2xx} | "
            f"{sock} / {tmo} | {per_round} | {share_text} |"
        )
    for note in POLICY_NOTE:
        print(f"\nOur endpoint ran with the {note}.")


def report_sequential(
    seq: dict[str, dict[str, float]], httpx_p50: float | None, by: dict[str, float] | None, n: int
) -> None:
    print(f"\n### 3. Single-request latency (sequential, 1 keep-alive connection, {n} requests)\n")
    print("| what | p50 | p99 |")
    print("|---|---:|---:|")
    labels = {
        "sqlite": "ours over HTTP, SQLite (`http.client`)",
        "postgres": "ours over HTTP, PostgreSQL (`http.client`)",
        "ceiling": "ceiling endpoint over HTTP (`http.client`)",
    }
    for name, r in seq.items():
        print(f"| {labels[name]} | {r['p50']:.0f} µs | {r['p99']:.0f} µs |")
    if httpx_p50 is not None:
        print(
            "| ours over HTTP, SQLite (`httpx.Client`, what an agent would use) | "
            f"{httpx_p50:.0f} µs | |"
        )
    if by is not None:
        print(f"| (d) x402 SDK signing locally, in process (one core) | {by['(d)']:.0f} µs | |")
        parse_too = by["(d')"]
        print(f"| (d') the same plus parsing the 402 body | {parse_too:.0f} µs | |")
        ours = seq["sqlite"]["p50"]
        verdict = "faster" if ours < by["(d)"] else "slower"
        print(
            f"\nSigning over HTTP (p50 {ours:.0f} µs) is {by['(d)'] / ours:.2f}x the speed of "
            f"signing locally with the SDK ({by['(d)']:.0f} µs): HTTP is **{verdict}**."
        )


def machine_line(loadgen_desc: str) -> str:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPU ({cpu}), "
        f"Python {platform.python_version()}, load generator: {loadgen_desc}, "
        f"1-min load average at start {load1:.2f}"
    )


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--postgres", action="store_true", help="also run our endpoint on PostgreSQL")
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
    p.add_argument("--skip-in-process", action="store_true")
    p.add_argument("--skip-http", action="store_true")
    p.add_argument(
        "--profile",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after the measurements, sample our SQLite server with py-spy under load",
    )
    p.add_argument("--profile-top", type=int, default=15)
    p.add_argument("--py-spy", default=None, help="path of the py-spy binary")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, db)")
    return p.parse_args(argv)


def run_http(args: argparse.Namespace, workdir: Path, by: dict[str, float] | None) -> None:
    loadgen = pick_loadgen(args.loadgen)
    if loadgen == "wrk":
        version = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
        first = (version.stdout + version.stderr).strip().splitlines()
        loadgen_desc = (
            f"`{first[0].split(' [')[0] if first else 'wrk'}` -t{args.threads} + bench/sign.lua"
        )
    else:
        loadgen_desc = f"bench/loadgen.py ({args.python_client} asyncio client; wrk not found)"
    log(f"load generator: {loadgen_desc}")
    body = json.dumps(REQUEST_BODY, separators=(",", ":")).encode()
    body_file = workdir / "body.json"
    body_file.write_bytes(body)

    targets: list[Target] = []
    with contextlib.ExitStack() as stack:
        log("starting paysign (SQLite)")
        targets.append(start_paysign("sqlite", workdir, None))
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

        for t in [*targets, ceiling]:
            if t.proc.poll() is not None:
                raise SystemExit(f"{t.name} died during the run:\n{tail(t.log_path)}")
            stop(t.proc)

    report_http(targets, ceiling, loadgen_desc, args)
    report_sequential(seq, httpx_p50, by, args.sequential)
    if profile_text:
        print(f"\n### Profile of our SQLite server under load (py-spy, {args.profile:g} s)\n")
        print(profile_text)
    bad = sum(r["non2xx"] for t in targets for r in t.runs)
    if bad:
        raise SystemExit(f"{bad} non-2xx answers from our endpoint during the run")


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
        if not args.skip_in_process:
            timings, pinning = in_process(args)
            by = report_in_process(timings, pinning)
            sys.stdout.flush()
        if not args.skip_http:
            run_http(args, workdir, by)
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
