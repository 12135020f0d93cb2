"""The operator CLI and ``paysign serve`` as real processes, sharing one database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import free_port, signature_body

PAYSIGN = str(Path(sys.executable).with_name("paysign"))


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PAYSIGN_")}
    environment["PAYSIGN_DATA_DIR"] = str(tmp_path / "var")
    if not database_url.startswith("sqlite"):
        environment["PAYSIGN_DATABASE_URL"] = database_url
    return environment


def paysign(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PAYSIGN, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def ok_json(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def server(env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [PAYSIGN, "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=15)
        # Nothing secret ever reaches the log.
        assert b"psk_" not in stderr
        assert b"totp" not in stderr.lower()


def test_admin_contract(env: dict[str, str]) -> None:
    created = ok_json(
        paysign(
            env,
            "admin",
            "create-account",
            "--email",
            "Op@Example.com",
            "--password",
            "long enough pass",
        )
    )
    assert set(created) == {"accountId", "email", "walletAddress", "totpSecret"}
    assert created["email"] == "op@example.com"
    assert created["walletAddress"].startswith("0x") and len(created["walletAddress"]) == 42

    issued = ok_json(
        paysign(env, "admin", "issue-key", "--email", "op@example.com", "--expires-in-days", "7")
    )
    assert set(issued) == {"apiKey", "expiresAt"}
    assert issued["apiKey"].startswith("psk_") and issued["expiresAt"].endswith("Z")

    again = paysign(env, "admin", "issue-key", "--email", "op@example.com")
    assert again.returncode == 1 and "already has an active API key" in again.stderr
    assert again.stdout == ""

    for days in ("0", "366"):
        bad = paysign(
            env, "admin", "issue-key", "--email", "op@example.com", "--expires-in-days", days
        )
        assert bad.returncode == 1 and "1 to 365" in bad.stderr

    assert ok_json(paysign(env, "admin", "revoke-key", "--email", "op@example.com"))["revoked"]
    none_left = paysign(env, "admin", "revoke-key", "--email", "op@example.com")
    assert none_left.returncode == 1 and "no active API key" in none_left.stderr

    dup = paysign(
        env,
        "admin",
        "create-account",
        "--email",
        "op@example.com",
        "--password",
        "long enough pass",
    )
    assert dup.returncode == 1 and "already exists" in dup.stderr
    unknown = paysign(env, "admin", "issue-key", "--email", "ghost@example.com")
    assert unknown.returncode == 1 and "no account" in unknown.stderr


@pytest.mark.slow
def test_serve_signs_with_keys_managed_while_it_runs(env: dict[str, str], server: str) -> None:
    ok_json(
        paysign(
            env,
            "admin",
            "create-account",
            "--email",
            "live@example.com",
            "--password",
            "long enough pass",
        )
    )
    key = ok_json(paysign(env, "admin", "issue-key", "--email", "live@example.com"))["apiKey"]
    headers = {"Authorization": f"Bearer {key}"}

    # A new seller is Open Ecosystem and needs the holder's approval first (the default).
    pending = httpx.post(f"{server}/wallets/signatures", json=signature_body(), headers=headers)
    assert pending.status_code == 403
    assert pending.json()["type"] == f"{server}/problems/allow-pending"
    listed = ok_json(paysign(env, "admin", "get-policy", "--email", "live@example.com"))
    assert listed["pending"] == ["api.example.com/weather"]
    approved = ok_json(
        paysign(
            env,
            "admin",
            "approve-seller",
            "--email",
            "live@example.com",
            "--seller",
            "api.example.com/weather",
        )
    )
    assert approved == {"rule": "api.example.com/weather", "list": "allow", "pendingResolved": 1}

    signed = httpx.post(f"{server}/wallets/signatures", json=signature_body(), headers=headers)
    assert signed.status_code == 200, signed.text
    assert signed.json()["paymentSignatureHeader"]

    # Problem type URLs follow the address the service was started on.
    refused = httpx.post(f"{server}/wallets/signatures", json={}, headers=headers)
    assert refused.json()["type"] == f"{server}/problems/malformed-request"

    ok_json(paysign(env, "admin", "revoke-key", "--email", "live@example.com"))
    revoked = httpx.post(f"{server}/wallets/signatures", json=signature_body(), headers=headers)
    assert revoked.status_code == 401 and revoked.json() == {"message": "Unauthorized"}


def test_embedded_default_keeps_a_private_master_key(env: dict[str, str], tmp_path: Path) -> None:
    ok_json(
        paysign(
            env,
            "admin",
            "create-account",
            "--email",
            "m@example.com",
            "--password",
            "long enough pass",
        )
    )
    key_file = tmp_path / "var" / "master.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
