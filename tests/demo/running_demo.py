"""``paysign demo`` as a real process for end-to-end tests, an authenticator app that hands out
codes the service has not seen, and USDC balances read straight from the demo's chain.

    with RunningDemo(tmp_path, {"PAYSIGN_SMTP_URL": smtp.url}) as demo:
        httpx.get(f"{demo.service}/healthz")
        usdc_balance(demo.rpc_url, demo.usdc, "0x…")
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pyotp

from conftest import PAYSIGN, free_port

_START_SECONDS = 90.0
_STOP_SECONDS = 30.0
# The banner's chain line: "chain  http://127.0.0.1:P  (sandbox: eip155:84532, USDC 0x…)".
_CHAIN_LINE = re.compile(
    r"chain\s+(?P<rpc>http://\S+)\s+\(sandbox: (?P<network>\S+), USDC (?P<usdc>0x[0-9a-fA-F]{40})\)"
)
_BALANCE_OF = "0x70a08231"  # balanceOf(address)
# keccak256("Transfer(address,address,uint256)")
_TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


class RunningDemo:
    """``paysign demo --port P`` on free ports with its own data directory; ``env`` adds
    ``PAYSIGN_*`` settings. Ready once its banner is out; stopped with a terminal's Ctrl-C,
    and its log then holds no secret."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        ports: set[int] = set()
        while len(ports) < 3:  # three distinct ports (the OS may hand one out twice)
            ports.add(free_port())
        service_port, sellers_port, facilitator_port = sorted(ports)
        self.port = service_port
        self.service = f"http://127.0.0.1:{service_port}"
        self.sellers = f"http://127.0.0.1:{sellers_port}"
        self.data_dir = tmp_path / "var"
        self.log = tmp_path / "demo.log"  # a file, not a pipe: a busy server never blocks on it
        base = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
        self.env = base | {
            "PAYSIGN_DATA_DIR": str(self.data_dir),
            "PAYSIGN_DEMO_SELLERS_URL": self.sellers,
            "PAYSIGN_DEMO_FACILITATOR_PORT": str(facilitator_port),
            **env,
        }
        self.rpc_url = ""
        self.usdc = ""

    def __enter__(self) -> RunningDemo:
        with self.log.open("wb") as output:
            self.proc = subprocess.Popen(
                [PAYSIGN, "demo", "--port", str(self.port)],
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_for_banner()
        except BaseException:
            self._kill()
            raise
        return self

    def _wait_for_banner(self) -> None:
        deadline = time.monotonic() + _START_SECONDS
        while (found := _CHAIN_LINE.search(self.output())) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"paysign demo did not start:\n{self.output()[-3000:]}")
            time.sleep(0.1)
        self.rpc_url, self.usdc = found.group("rpc"), found.group("usdc")
        assert httpx.get(f"{self.service}/healthz", timeout=5).status_code == 200

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def _kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __exit__(self, *exc: object) -> None:
        try:
            self.proc.send_signal(signal.SIGINT)  # a terminal's Ctrl-C
            self.proc.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        finally:
            self._kill()

    def assert_log_keeps_secrets(self, *secrets: str) -> None:
        output = self.output()
        for secret in secrets:
            assert secret not in output, "a secret reached the demo's log"
        errors = [line for line in output.splitlines() if "unhandled_error" in line]
        assert not errors, "\n".join(errors[:3])


class Authenticator:
    """The holder's authenticator app, for a service that accepts a code once and one
    30-second step of drift either way.

    ``fresh()`` gives the oldest code the service still takes that is newer than the last one
    used, so a run of step-ups (sign-in, key, withdrawal) never waits for the clock; it waits
    only when it has got a whole step ahead. A margin keeps a code off a step boundary."""

    STEP = 30
    MARGIN = 3

    def __init__(self, secret: str) -> None:
        self.totp = pyotp.TOTP(secret, interval=self.STEP)
        self.last_step: int | None = None

    def _step(self, at: float) -> int:
        return int(at) // self.STEP

    def fresh(self) -> str:
        while True:
            now = time.time()
            # The oldest accepted step, as the service will see it a moment from now.
            oldest = self._step(now + self.MARGIN) - 1
            newest = self._step(now - self.MARGIN) + 1
            step = oldest if self.last_step is None else max(self.last_step + 1, oldest)
            if step <= newest:
                self.last_step = step
                return str(self.totp.at(step * self.STEP))
            time.sleep(0.5)

    def replayed(self) -> str:
        """The code used last: refused, however fresh it still is."""
        assert self.last_step is not None
        return str(self.totp.at(self.last_step * self.STEP))

    def wrong(self) -> str:
        """A well-formed code that no step near now has."""
        near = {str(self.totp.at((self._step(time.time()) + d) * self.STEP)) for d in range(-2, 3)}
        guess = int(self.replayed())
        while f"{guess:06d}" in near:
            guess = (guess + 1) % 1_000_000
        return f"{guess:06d}"


def rpc(rpc_url: str, method: str, params: list[object]) -> Any:
    """One JSON-RPC call to the chain; its result."""
    response = httpx.post(
        rpc_url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, timeout=10
    )
    response.raise_for_status()
    reply = response.json()
    assert "error" not in reply, reply
    return reply["result"]


def usdc_balance(rpc_url: str, usdc: str, owner: str) -> int:
    """``balanceOf(owner)`` of the USDC contract, by ``eth_call``."""
    data = _BALANCE_OF + _word(owner)
    return int(rpc(rpc_url, "eth_call", [{"to": usdc, "data": data}, "latest"]), 16)


def usdc_transfers(rpc_url: str, usdc: str, tx_hash: str) -> list[tuple[str, str, int]]:
    """The USDC ``Transfer`` logs of a mined, successful transaction: (from, to, value), with
    the addresses in lower case."""
    receipt = rpc(rpc_url, "eth_getTransactionReceipt", [tx_hash])
    assert receipt is not None, f"{tx_hash} is not mined"
    assert int(receipt["status"], 16) == 1, receipt
    return [
        ("0x" + log["topics"][1][-40:], "0x" + log["topics"][2][-40:], int(log["data"], 16))
        for log in receipt["logs"]
        if log["address"].lower() == usdc.lower() and log["topics"][0] == _TRANSFER_TOPIC
    ]


def _word(address: str) -> str:
    return address.removeprefix("0x").lower().rjust(64, "0")


def wait_until(predicate: object, what: str, seconds: float = 15.0) -> None:
    """Polls ``predicate()`` until it is true; fails, naming ``what``, after ``seconds``."""
    assert callable(predicate)
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not in {seconds:.0f} s: {what}")
        time.sleep(0.1)
