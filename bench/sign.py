"""Signing benchmark: in-process signing cost and HTTP throughput, in one run.

    .venv/bin/python bench/sign.py              # ~1 min; `make bench` runs exactly this
    .venv/bin/python bench/sign.py --postgres   # also our endpoint on PostgreSQL (~+25 s)
    .venv/bin/python bench/sign.py --skip-in-process --big-state [--postgres]
        # 10,000 policy rules + a 1,000,000-row ledger vs an empty policy (~1.5 min per database)
    .venv/bin/python bench/sign.py --help

Everything runs in one invocation so the ratios compare numbers taken minutes apart on the
same (noisy, shared, 2-core) machine:

1. In process, one core: per-signature µs for eth-account, our full path, our signing alone,
   the bare libsecp256k1 floor, and the x402 SDK client signing locally.
2. Over HTTP on 127.0.0.1 (wrk, or bench/loadgen.py without it): our ``POST
   /wallets/signatures`` against a bare Starlette endpoint served the same way (the ceiling).
3. Sequential single-request latency of our endpoint, against the SDK's local signing time.

``--big-state`` replaces 2 and 3 with the acceptance check "with a policy of 10,000 rules and a
ledger of 1,000,000 signatures, the signing benchmark stays within 10% of the empty-policy
figure": our endpoint with an empty policy, then the same server and database after loading
that state, against a second empty-policy account on the big ledger.

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

import cpu_breakdown  # bench/cpu_breakdown.py, beside this script

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


def own_cpu_seconds(pid: int) -> float | None:
    """user + system CPU time of one process (Linux /proc), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def signer_children(pid: int) -> list[int]:
    """The server's signer processes (``custody.signer_worker``): part of its cost."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"signer_worker" in cmdline:
                found.append(int(child))
    return found


def process_cpu_seconds(pid: int) -> float | None:
    """CPU time of a server: its own, and its signer process's."""
    own = own_cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(own_cpu_seconds(child) or 0.0 for child in signer_children(pid))


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
    env: dict[str, str] = field(default_factory=dict)  # PAYSIGN_* of `paysign admin` calls
    email: str = ""

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
    # The reconciler is a background job, not the signing path: parked, so that it does not
    # start working through the benchmark's own (sandbox) signatures in the middle of a run.
    env["PAYSIGN_RECONCILE_INTERVAL_SECONDS"] = str(7 * 86_400)
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


def bench_account(env: dict[str, str], workdir: Path) -> tuple[str, str]:
    """A fresh account with an API key and BENCH_POLICY: (email, api key)."""
    email = f"bench-{secrets.token_hex(4)}@example.com"
    admin(env, "create-account", "--email", email, "--password", "benchmark password 1234")
    api_key = admin(env, "issue-key", "--email", email, "--expires-in-days", "1")["apiKey"]
    open_policy(env, email, workdir)
    return email, str(api_key)


def start_paysign(
    name: str, workdir: Path, database_url: str | None, extra_env: dict[str, str] | None = None
) -> Target:
    data_dir = workdir / name
    data_dir.mkdir(mode=0o700)
    env = {**paysign_env(data_dir, database_url), **(extra_env or {})}
    email, api_key = bench_account(env, workdir)
    port = free_port()
    log_path = workdir / f"{name}.log"
    proc = spawn(
        [*paysign_cmd(), "serve", "--host", HOST, "--port", str(port)], env=env, log_path=log_path
    )
    wait_healthy(proc, port, log_path)
    return Target(name, port, api_key, proc, log_path, env=env, email=email)


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
    own_before = own_cpu_seconds(target.proc.pid)
    proc = spawn(cmd, env=env, capture=True)
    try:
        out, _ = proc.communicate(timeout=seconds + 60)
    finally:
        stop(proc)
    cpu_after = process_cpu_seconds(target.proc.pid)
    own_after = own_cpu_seconds(target.proc.pid)
    for line in out.decode(errors="replace").splitlines():
        if line.startswith("BENCH_RESULT "):
            result: dict[str, Any] = json.loads(line[len("BENCH_RESULT ") :])
            result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
            if cpu_before is not None and cpu_after is not None and result["requests"]:
                result["cpu_us"] = (cpu_after - cpu_before) * 1e6 / result["requests"]
            if own_before is not None and own_after is not None and result["requests"]:
                result["own_cpu_us"] = (own_after - own_before) * 1e6 / result["requests"]
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


def breakdown(
    ceiling: Target,
    ours: Target,
    args: argparse.Namespace,
    body_file: Path,
    loadgen: str,
    workdir: Path,
) -> str:
    """``cpu_breakdown`` of the ceiling and our SQLite server, each under the same load."""
    columns: list[tuple[str, dict[str, float], float]] = []
    for target in (ceiling, ours):
        log(f"perf on {target.name} for {args.cpu_breakdown:g} s")
        got = cpu_breakdown.record(
            [target.proc.pid, *signer_children(target.proc.pid)],
            workdir / f"perf-{target.name}.data",
            lambda target=target: load(target, args, body_file, args.cpu_breakdown, loadgen),
            spawn,
            stop,
            workdir / "perf.log",
        )
        if isinstance(got, str):
            return f"_(CPU breakdown skipped: {got})_"
        groups, result = got
        cpu_us = result.get("cpu_us")
        if not isinstance(cpu_us, float):
            return "_(CPU breakdown skipped: no CPU time for the server on this system)_"
        columns.append((target.name, groups, cpu_us))
    note = (
        "Each library's share of the samples times the server CPU per request of the same run "
        "(sampling slows the server a little; compare the columns, not these totals with the "
        "table above). The difference column is what our endpoint adds to the framework."
    )
    return cpu_breakdown.table(columns) + "\n\n" + note


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
        "| server | req/s | p50 | p99 | server CPU / req (signer process included) | non-2xx "
        "| socket errors / timeouts "
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
            "sqlite-inline": "ours, SQLite, signing on the event loop "
            "(`PAYSIGN_SIGNER_PROCESS=false`)",
            "postgres": "ours `POST /wallets/signatures`, PostgreSQL",
        }[t.name]
        cpu = [r["cpu_us"] for r in t.runs if "cpu_us" in r]
        own = [r["own_cpu_us"] for r in t.runs if "own_cpu_us" in r]
        cpu_text = f"{statistics.median(cpu):.0f} µs" if cpu else "n/a"
        if cpu and own and statistics.median(cpu) - statistics.median(own) >= 0.5:
            cpu_text += f" ({statistics.median(own):.0f} µs without it)"
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
        "sqlite-inline": "ours over HTTP, SQLite, signing on the event loop (`http.client`)",
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
# 4. Big state (--big-state): 10,000 policy rules and a 1,000,000-row ledger
# --------------------------------------------------------------------------------------------

WITHIN = 0.10  # the acceptance check: big state within 10% of the empty-policy figure
DAY_S = 86_400
LEDGER_DAYS = 30
LEDGER_CHUNK = 50_000  # rows generated at a time
LEDGER_TX_ROWS = 250_000  # rows per bulk transaction
BIG_SEED = 402
USDC_BASE = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"

# Rules on the benchmarked seller's own host and its parents: the candidate lookup for
# api.example.com (api.example.com, *.example.com, *.com) returns the 8 without a port, none of
# which refuses /weather (``/weatherx`` does not cover ``/weather``: prefixes end on segments).
OWN_HOST_RULES: dict[str, list[str]] = {
    "allow": [
        "api.example.com",
        "api.example.com/weather/v2",
        "*.example.com/status",
        "api.example.com:8443/weather",
    ],
    "deny": [
        "api.example.com/admin",
        "api.example.com/weatherx",
        "api.example.com/v1",
        "*.example.com/internal",
        "api.example.com/weather-archive",
        "example.com",
        "api.example.com:8443",
    ],
}
_WORDS = [
    "data",
    "quote",
    "weather",
    "search",
    "maps",
    "llm",
    "news",
    "price",
    "feed",
    "geo",
    "ocr",
    "tts",
    "img",
    "vec",
    "chain",
    "sport",
    "fx",
    "stock",
    "law",
    "med",
]
_TLDS = ["com", "io", "ai", "net", "dev", "org", "co", "app", "xyz", "cloud"]
_SUBS = ["api", "", "data", "v2-api", "edge", "gw", "eu.api", "us.api"]
_PREFIXES = ["/v1", "/v2", "/v3", "/api", "/api/v1", "/beta", "/premium", "/v1/quotes", "/graphql"]
_LEDGER_PATHS = ["/", "/v1/quote", "/weather", "/v2/search", "/api/data", "/graphql", "/v1/chat"]


def big_policy(rules: int, rng: Any) -> dict[str, Any]:
    """BENCH_POLICY's switches and caps with ``rules`` rules, about half allow, half deny, as a
    user would write them (some with a scheme or a trailing slash; ``set-policy`` normalises)."""
    from paysign.policy.rules import parse_rule, seller_location

    lists: dict[str, list[str]] = {k: list(v) for k, v in OWN_HOST_RULES.items()}
    seen = {parse_rule(t) for v in lists.values() for t in v}
    want = {"allow": rules // 2, "deny": rules - rules // 2}
    while any(len(lists[k]) < want[k] for k in want):
        kind = "allow" if len(lists["allow"]) < want["allow"] else "deny"
        if len(lists["deny"]) < want["deny"] and rng.random() < 0.5:
            kind = "deny"
        domain = f"{rng.choice(_WORDS)}{rng.randrange(4000)}.{rng.choice(_TLDS)}"
        wildcard = rng.random() < 0.2
        if wildcard:
            host = "*." + domain
        else:
            sub = rng.choice(_SUBS)
            host = f"{sub}.{domain}" if sub else domain
            if rng.random() < 0.03:
                host += f":{rng.choice((8080, 8443, 9000))}"
        text = host + (rng.choice(_PREFIXES) if rng.random() < 0.35 else "")
        if rng.random() < 0.05 and not wildcard:
            text = "https://" + text + "/"
        rule = parse_rule(text)
        if rule in seen:
            continue
        seen.add(rule)
        lists[kind].append(text)
    where = seller_location(str(REQUEST_BODY["sellerUrl"]))
    refusing = [t for t in lists["deny"] if parse_rule(t).matches(where)]
    if refusing or not any(parse_rule(t).matches(where) for t in lists["allow"]):
        raise SystemExit(f"big policy would refuse the benchmarked seller: {refusing[:3]}")
    return {**BENCH_POLICY, "allow": lists["allow"], "deny": lists["deny"]}


SIGNATURE_COLUMNS = (
    "account_id, api_key_id, seller_host, seller_path, network, asset, pay_to, amount, nonce, "
    "valid_before, sandbox, x402_version, status, created_at, tier, rule"
)


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
            f"{rng.choice(_SUBS) or 'api'}.{rng.choice(_WORDS)}{i}.{rng.choice(_TLDS)}",
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


class _Rollback(Exception):
    pass


def store_timings(
    database_url: str | None, data_dir: Path, api_key: str, n: int
) -> dict[str, float]:
    """Median µs of the signing store's statements, in process, on the same database: the
    statements in one transaction that is rolled back, then ``n`` whole committed
    transactions as the service runs them (key + rules + reservation + insert; no signing)."""
    from paysign.policy.caps import windows_at
    from paysign.policy.rules import candidate_hosts, seller_location
    from paysign.services.keys import hash_api_key
    from paysign.store.database import Database
    from paysign.store.repositories import SignatureRecord
    from paysign.store.signing_store import (
        PostgresSigningStore,
        SigningStore,
        SqliteSigningStore,
    )

    db = None
    store: SigningStore
    if database_url is None:
        store = SqliteSigningStore(str(data_dir / "paysign.db"))
    else:
        db = Database(database_url, pool_size=1)
        store = PostgresSigningStore(db)
    key_hash = hash_api_key(api_key)
    hosts = candidate_hosts(seller_location(str(REQUEST_BODY["sellerUrl"])))
    now = int(time.time())

    def timed(fn: Callable[[], object], count: int) -> float:
        for _ in range(min(50, count)):
            fn()
        lat = []
        for _ in range(count):
            t = time.perf_counter_ns()
            fn()
            lat.append(time.perf_counter_ns() - t)
        return statistics.median(lat) / 1000

    def record(account_id: str, key_id: str) -> SignatureRecord:
        return SignatureRecord(
            account_id=account_id,
            api_key_id=key_id,
            seller_host="api.example.com",
            seller_path="/weather",
            network="eip155:84532",
            asset=USDC_SEPOLIA,
            pay_to=PAY_TO.lower(),
            amount=10000,
            nonce=os.urandom(32),
            valid_before=now + 60,
            sandbox=False,
            x402_version=2,
            created_at=now,
            tier="OPEN_ECOSYSTEM",
            rule="api.example.com",
        )

    out: dict[str, float] = {}
    try:
        with contextlib.suppress(_Rollback), store.transaction() as tx:
            # The statements themselves: the transaction would answer repeats from memory.
            sql = tx.statements if hasattr(tx, "statements") else tx
            holder = sql.key_holder(key_hash, now)
            assert holder is not None
            aid, kid = holder.account_id, holder.key_id
            out["key_holder"] = timed(lambda: sql.key_holder(key_hash, now), n)
            out["grant_rows"] = len(sql.grants(aid, hosts))
            out["grants"] = timed(lambda: sql.grants(aid, hosts), n)
            if hasattr(sql, "insert_signatures"):
                out["insert"] = timed(lambda: sql.insert_signatures([record(aid, kid)]), n)
            else:
                out["insert"] = timed(lambda: sql.insert_signature(record(aid, kid)), n)
            raise _Rollback

        def whole() -> None:
            with store.transaction() as tx:
                h = tx.key_holder(key_hash, now)
                assert h is not None
                tx.grants(h.account_id, hosts)
                tx.reserve(h.account_id, 10000, *windows_at(now), h.policy.caps)
                tx.insert_signature(record(h.account_id, h.key_id))

        out["whole"] = timed(whole, max(100, n // 4))
    finally:
        store.close()
        if db is not None:
            db.dispose()
    return out


@dataclass
class BigRun:
    label: str
    role: str  # "empty" (baseline, before the load), "big", "empty-after"
    rules: int
    ledger: int
    result: dict[str, Any]


@dataclass
class BigReport:
    backend: str
    runs: list[BigRun] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    plan: str = ""


def big_state_backend(
    name: str,
    args: argparse.Namespace,
    workdir: Path,
    loadgen: str,
    body: bytes,
    body_file: Path,
    pg: tuple[str, str] | None,
) -> BigReport:
    import random

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


def _median(runs: list[BigRun], key: str) -> float:
    return statistics.median(float(r.result[key]) for r in runs)


def report_big_state(report: BigReport, args: argparse.Namespace, loadgen_desc: str) -> bool:
    backend = {"sqlite": "SQLite (embedded default)", "postgres": "PostgreSQL"}[report.backend]
    ld = report.load
    print(
        f"\n### Big state, {backend}: {args.big_rules:,} policy rules and a "
        f"{args.big_ledger:,}-signature ledger ({loadgen_desc}, {args.connections} connections, "
        f"{args.duration:g} s per run)\n"
    )
    print(
        f"* Policy: `paysign admin set-policy --file` with {ld['allow']:,} allow + "
        f"{ld['deny']:,} deny rules took **{ld['policy_s']:.1f} s** (CLI start and the "
        "printed document included)."
    )
    print(
        f"* Ledger: {args.big_ledger:,} rows over {args.big_accounts:,} other accounts "
        f"+ the benchmarked one ({ld['own_rows']:,} rows), past {LEDGER_DAYS} days, "
        f"{'COPY' if report.backend == 'postgres' else 'executemany'} in "
        f"{LEDGER_TX_ROWS:,}-row transactions: **{ld['ledger_s']:.1f} s** "
        f"({args.big_ledger / ld['ledger_s']:,.0f} rows/s), then {ld['finish_s']:.1f} s "
        f"for {ld['finish_how']}. {ld['size']}; {ld['total_rows']:,} rows in `signatures`."
    )
    print(f"* Plan of the rules lookup for A: `{report.plan}`")
    base = [r for r in report.runs if r.role == "empty"]
    base_rps, base_p50 = _median(base, "rps"), _median(base, "p50_us")
    base_cpu = statistics.median(r.result.get("cpu_us", float("nan")) for r in base)
    print(
        "\n| # | run | rules (account) | rows in `signatures` | req/s | p50 | p99 "
        "| server CPU / req | req/s ÷ baseline | p50 ÷ baseline | non-2xx | load avg |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, r in enumerate(report.runs, 1):
        res = r.result
        cpu = f"{res['cpu_us']:.0f} µs" if "cpu_us" in res else "n/a"
        print(
            f"| {i} | {r.label} | {r.rules:,} | {r.ledger:,} | {fmt_int(res['rps'])} | "
            f"{ms(res['p50_us'])} | {ms(res['p99_us'])} | {cpu} | {res['rps'] / base_rps:.2f} | "
            f"{res['p50_us'] / base_p50:.2f} | {res['non2xx']} | {res['load1']:.1f} |"
        )

    def ratio_row(what: str, num: list[BigRun], den: list[BigRun], check: bool) -> bool:
        rps = _median(num, "rps") / _median(den, "rps")
        p50 = _median(num, "p50_us") / _median(den, "p50_us")
        cpu_num = statistics.median(r.result.get("cpu_us", float("nan")) for r in num)
        cpu_den = statistics.median(r.result.get("cpu_us", float("nan")) for r in den)
        ok = rps >= 1 - WITHIN
        verdict = f"{'pass' if ok else 'FAIL'} {goal(ok)}" if check else "(diagnostic)"
        print(f"| {what} | {rps:.3f} | {p50:.3f} | {cpu_num / cpu_den:.3f} | {verdict} |")
        return ok

    big = [r for r in report.runs if r.role == "big"]
    after = [r for r in report.runs if r.role == "empty-after"]
    print(
        f"\n| comparison (medians) | req/s ratio | p50 ratio | CPU/req ratio "
        f"| req/s within {WITHIN:.0%} |"
    )
    print("|---|---:|---:|---:|---|")
    ok = ratio_row("**big state (A) ÷ empty-policy baseline (A before the load)**", big, base, True)
    ratio_row(
        "big state (A) ÷ empty policy on the big ledger (B): the rules' cost", big, after, True
    )
    ratio_row(
        "empty policy on the big ledger (B) ÷ baseline: the ledger size's cost", after, base, True
    )
    print(f"\nBaseline: {fmt_int(base_rps)} req/s, p50 {ms(base_p50)}, CPU/req {base_cpu:.0f} µs.")

    print(
        "\nSigning store in process, same database, median µs per call (the statements in a "
        "rolled-back transaction; `whole` = a committed transaction: key, rules, reservation, "
        "insert, no signing):\n"
    )
    cols = list(report.timings)
    print("| statement | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    names = {
        "key_holder": "`key_holder` (key + wallet + policy)",
        "grants": "`grants` (candidate rules)",
        "grant_rows": "rows `grants` returns",
        "insert": "`insert_signature`",
        "whole": "`whole` (committed)",
    }
    for key, label in names.items():
        cells = []
        for c in cols:
            v = report.timings[c][key]
            cells.append(f"{v:.0f}" if key == "grant_rows" else f"{v:.1f} µs")
        print(f"| {label} | " + " | ".join(cells) + " |")
    return ok


def run_big_state(args: argparse.Namespace, workdir: Path) -> None:
    loadgen = pick_loadgen(args.loadgen)
    loadgen_desc = f"`wrk -t{args.threads}`" if loadgen == "wrk" else "bench/loadgen.py"
    body = json.dumps(REQUEST_BODY, separators=(",", ":")).encode()
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
        help="after the measurements, sample our SQLite server with py-spy under load",
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
        if args.big_state:
            run_big_state(args, workdir)
        elif not args.skip_http:
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
