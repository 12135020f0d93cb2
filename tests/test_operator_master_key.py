"""An operator command run without the service's ``PAYSIGN_MASTER_KEY`` must not make a second
master key for the service's database: wallets sealed under it would never open for the
service. Real processes, real SQLite."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest

from conftest import ok_json, paysign

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
CREATE = ("admin", "create-account", "--email", "a@example.com", "--password", "p" * 12)


@SQLITE_ONLY
def test_a_command_without_the_services_key_creates_none(
    env: dict[str, str], tmp_path: Path
) -> None:
    services_key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    service_env = {**env, "PAYSIGN_MASTER_KEY": services_key}
    # The service has migrated its database (as `serve` does at start); nothing is sealed yet.
    ok_json(paysign(service_env, "migrate"))

    refused = paysign(env, *CREATE)  # the operator's shell lacks PAYSIGN_MASTER_KEY
    assert refused.returncode == 1 and refused.stdout == ""
    assert "PAYSIGN_MASTER_KEY" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "var" / "master.key").exists()

    # With the service's environment, the account is sealed under the service's key.
    ok_json(paysign(service_env, *CREATE))
    assert ok_json(paysign(service_env, "admin", "list-accounts", "--json"))["accounts"]


@SQLITE_ONLY
def test_a_fresh_data_dir_still_gets_its_key_from_the_first_command(
    env: dict[str, str], tmp_path: Path
) -> None:
    ok_json(paysign(env, *CREATE))
    assert (tmp_path / "var" / "master.key").exists()
    ok_json(paysign(env, "admin", "issue-key", "--email", "a@example.com"))
