"""Benchmark accounts: an account, its API key, and a policy that checks but never refuses."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from bench.paysign_cli import admin, admin_help

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
#: How the accounts' policy was set, for the report (one entry, whatever the accounts).
POLICY_NOTE: list[str] = []


def open_policy(env: dict[str, str], email: str, workdir: Path) -> None:
    """``paysign admin set-policy`` with BENCH_POLICY (skipped on a tree without policies)."""
    if b"set-policy" not in admin_help(env):
        note = "no policy layer in this tree"
    else:
        policy_file = workdir / f"policy-{email}.json"  # accounts may be made in parallel
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
