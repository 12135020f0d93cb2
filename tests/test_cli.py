"""The operator CLI and ``paysign serve`` as real processes, sharing one database."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import ServeProcess, ok_json, paysign, signature_body
from paysign.store.database import Database
from paysign.store.schema import accounts


@pytest.fixture
def server(env: dict[str, str]) -> Iterator[str]:
    with ServeProcess(env) as url:
        yield url


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


def test_policy_commands(env: dict[str, str], tmp_path: Path) -> None:
    ok_json(
        paysign(
            env,
            "admin",
            "create-account",
            "--email",
            "p@example.com",
            "--password",
            "long enough pass",
        )
    )
    before = ok_json(paysign(env, "admin", "get-policy", "--email", "p@example.com"))
    assert before == {
        "approval": "openEcosystem",
        "ecosystems": {"premium": True, "standard": True, "openEcosystem": True},
        "caps": {
            "perPayment": 1_000_000,
            "daily": 10_000_000,
            "monthly": 100_000_000,
            "hourly": None,
        },
        "allow": [],
        "deny": [],
        "payTo": {"allow": [], "deny": []},
        "frozen": False,
        "pending": [],
    }
    bad = dict(before, caps={"perPayment": -1, "daily": None, "monthly": None})
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(bad))
    refused = paysign(env, "admin", "set-policy", "--email", "p@example.com", "--file", str(path))
    assert refused.returncode == 1 and "/caps/perPayment" in refused.stderr
    path.write_text("{not json")
    refused = paysign(env, "admin", "set-policy", "--email", "p@example.com", "--file", str(path))
    assert refused.returncode == 1 and "not valid JSON" in refused.stderr
    assert ok_json(paysign(env, "admin", "get-policy", "--email", "p@example.com")) == before

    wanted = dict(
        before,
        approval="all",
        allow=["API.example.com/v1/"],
        deny=["*.evil.example"],
        pending=["ignored.example.com"],
    )
    path.write_text(json.dumps(wanted))
    after = ok_json(
        paysign(env, "admin", "set-policy", "--email", "p@example.com", "--file", str(path))
    )
    assert (after["approval"], after["allow"], after["deny"], after["pending"]) == (
        "all",
        ["api.example.com/v1"],
        ["*.evil.example"],
        [],
    )
    denied = ok_json(
        paysign(
            env,
            "admin",
            "deny-seller",
            "--email",
            "p@example.com",
            "--seller",
            "api.example.com/v1",
        )
    )
    assert denied["list"] == "deny"
    final = ok_json(paysign(env, "admin", "get-policy", "--email", "p@example.com"))
    assert (final["allow"], final["deny"]) == ([], ["*.evil.example", "api.example.com/v1"])
    bad_seller = paysign(
        env, "admin", "approve-seller", "--email", "p@example.com", "--seller", "not a host"
    )
    assert bad_seller.returncode == 1

    assert ok_json(paysign(env, "admin", "activity", "--email", "p@example.com")) == {
        "activity": []
    }


def test_reconcile_without_rpc_releases_nothing(env: dict[str, str]) -> None:
    assert ok_json(paysign(env, "reconcile")) == {
        "networks": [],
        "settled": 0,
        "expired": 0,
        "released": 0,
        "interrupted": False,
    }


@pytest.mark.parametrize(
    "command",
    [
        ("admin", "set-policy", "--email", "op@example.com", "--file"),
        ("catalog", "import"),
    ],
)
def test_a_document_from_a_device_is_refused_unread(env: dict[str, str], command: tuple) -> None:
    """/dev/zero was read until the memory ran out (2.7 GB, then a MemoryError traceback)."""
    refused = paysign(env, *command, "/dev/zero")
    assert refused.returncode == 1, refused.stderr
    assert "not a regular file" in refused.stderr and "Traceback" not in refused.stderr


def test_a_document_too_large_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    big = tmp_path / "policy.json"
    big.write_bytes(b" " * (16 * 1024 * 1024 + 1))
    refused = paysign(env, "admin", "set-policy", "--email", "op@example.com", "--file", str(big))
    assert refused.returncode == 1 and "larger than 16 MiB" in refused.stderr


def test_an_unreachable_database_is_one_line_not_a_traceback(env: dict[str, str]) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    gone = {**env, "PAYSIGN_DATABASE_URL": f"postgresql://paysign:s3cret@127.0.0.1:{port}/x"}
    for command in (("admin", "list-accounts"), ("admin", "get-policy", "--email", "a@b.example")):
        failed = paysign(gone, *command)
        assert failed.returncode == 1
        assert "Traceback" not in failed.stderr and "s3cret" not in failed.stderr
        assert "the database is unavailable" in failed.stderr


def test_list_accounts_never_sends_an_emails_control_characters_to_the_terminal(
    env: dict[str, str],
) -> None:
    """An email made before invisible characters were refused: its escape sequence hid text or
    moved the cursor in the operator's terminal."""
    ok_json(
        paysign(
            env,
            "admin",
            "create-account",
            "--email",
            "old@example.com",
            "--password",
            "long enough pass",
        )
    )
    served = env.get("PAYSIGN_DATABASE_URL", f"sqlite:///{env['PAYSIGN_DATA_DIR']}/paysign.db")
    db = Database(served)
    try:
        with db.write() as conn:
            conn.execute(accounts.update().values(email="\x1b[8mhidden\x1b[0m\u202e@example.com"))
    finally:
        db.dispose()
    table = paysign(env, "admin", "list-accounts")
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout and "\u202e" not in table.stdout
    assert "\\u001b[8mhidden\\u001b[0m\\u202e@example.com" in table.stdout
