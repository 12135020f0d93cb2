"""``paysign check`` and ``paysign migrate`` as real processes, beside a real ``paysign serve``,
on both databases; the dev chain and a Base-like anvil as the RPC endpoints they reach."""

from __future__ import annotations

import base64
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from anvil_support import base_mainnet_chain
from conftest import NOT_DURABLE_URL_OPTION, ServeProcess, free_port, ok_json, paysign
from paysign.store.database import normalise_url
from paysign.store.migrate import MIGRATIONS

REVISIONS = [r.revision for r in reversed(list(ScriptDirectory(str(MIGRATIONS)).walk_revisions()))]
HEAD = REVISIONS[-1]
#: Stands for a provider's API key in an RPC URL: never printed.
RPC_SECRET = "sEcReTrPcKeY"


@pytest.fixture(scope="module")
def mainnet_chain(dev_chain: Any) -> Iterator[str]:
    with base_mainnet_chain(dev_chain.rpc_url) as url:
        yield url


def checked(result: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str]]:
    """``paysign check``'s lines: item → (verdict, detail)."""
    lines = {}
    for line in result.stdout.splitlines():
        verdict, rest = line.split(maxsplit=1)
        item, detail = rest.split(": ", 1)
        lines[item] = (verdict, detail)
    return lines


def database_url(env: dict[str, str]) -> str:
    return env.get("PAYSIGN_DATABASE_URL") or f"sqlite:///{env['PAYSIGN_DATA_DIR']}/paysign.db"


def set_revision(env: dict[str, str], revision: str) -> None:
    engine = sa.create_engine(normalise_url(database_url(env)))
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    engine.dispose()


def new_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def test_check_on_a_fresh_data_directory_says_what_is_missing_and_creates_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    result = paysign(env, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = checked(result)
    sqlite = "PAYSIGN_DATABASE_URL" not in env
    assert lines["database"][0] == ("warn" if sqlite else "ok")
    assert ("does not exist yet" if sqlite else "migration(s) to apply") in lines["database"][1]
    assert lines["master key"][0] == "warn" and "creates" in lines["master key"][1]
    assert lines["mainnet RPC"][0] == "warn"
    assert "PAYSIGN_MAINNET_RPC_URL" in lines["mainnet RPC"][1]
    assert "live spend" in lines["mainnet RPC"][1]
    assert lines["testnet RPC"][0] == "ok" and "dev chain" in lines["testnet RPC"][1]
    assert lines["PAYSIGN_BASE_URL"] == (
        "ok",
        "http://127.0.0.1:8402 (loopback: reachable from this host only)",
    )
    assert lines["log level"] == ("ok", "info (PAYSIGN_LOG_LEVEL)")
    assert not (tmp_path / "var").exists()  # neither a database file nor a key file made


def test_check_beside_a_running_service_opens_a_stored_key_and_reaches_both_chains(
    env: dict[str, str], tmp_path: Path, dev_chain: Any, mainnet_chain: str
) -> None:
    with ServeProcess(env):
        created = ok_json(
            paysign(
                env,
                "admin",
                "create-account",
                "--email",
                "op@example.com",
                "--password",
                "long enough pass",
            )
        )
        chains = {
            "PAYSIGN_MAINNET_RPC_URL": f"{mainnet_chain}/?apikey={RPC_SECRET}",
            "PAYSIGN_TESTNET_RPC_URL": dev_chain.rpc_url,
        }
        result = paysign({**env, **chains}, "check")
        assert result.returncode == 0, result.stdout + result.stderr
        lines = checked(result)
        assert lines["database"][0] == "ok"
        assert lines["database"][1].endswith(f"reachable, schema {HEAD}")
        key_file = tmp_path / "var" / "master.key"
        assert lines["master key"] == ("ok", f"{key_file} opens a stored wallet key")
        assert lines["mainnet RPC"] == ("ok", f"{mainnet_chain} reachable (chain 8453)")
        assert lines["testnet RPC"][0] == "warn"  # reachable, but no treasury key for test funds
        assert "reachable (chain 84532)" in lines["testnet RPC"][1]
        assert lines["catalog"][0] == "ok" and "empty" in lines["catalog"][1]
        output = result.stdout + result.stderr
        for secret in (RPC_SECRET, key_file.read_text().strip(), created["totpSecret"]):
            assert secret not in output

        # A Base URL that is another chain, and a master key that is not the one in use.
        wrong = {"PAYSIGN_MAINNET_RPC_URL": dev_chain.rpc_url, "PAYSIGN_MASTER_KEY": new_key()}
        refused = paysign({**env, **wrong}, "check")
        assert refused.returncode == 1
        lines = checked(refused)
        assert (
            lines["mainnet RPC"][0] == "FAIL" and "chain 84532, not 8453" in lines["mainnet RPC"][1]
        )
        assert lines["master key"][0] == "FAIL"
        assert "does not open the stored wallet keys" in lines["master key"][1]
        assert wrong["PAYSIGN_MASTER_KEY"] not in refused.stdout + refused.stderr

    # The key file gone while wallets are sealed under it: said, not replaced by a new key.
    key_file.rename(tmp_path / "elsewhere.key")
    missing = paysign(env, "check")
    assert missing.returncode == 1
    assert checked(missing)["master key"][0] == "FAIL"
    assert "restore the key file" in checked(missing)["master key"][1]
    assert not key_file.exists()


def test_check_fails_a_postgresql_whose_crash_could_take_back_answered_signatures(
    env: dict[str, str],
) -> None:
    sqlite = "PAYSIGN_DATABASE_URL" not in env
    lines = checked(paysign(env, "check"))
    if sqlite:  # paysign flushes SQLite's log itself: nothing of the server's to check
        assert "database durability" not in lines
        return
    assert lines["database durability"] == (
        "ok",
        "fsync = on, synchronous_commit = on, full_page_writes = on",
    )
    fast = {**env, "PAYSIGN_DATABASE_URL": env["PAYSIGN_DATABASE_URL"] + NOT_DURABLE_URL_OPTION}
    result = paysign(fast, "check")
    assert result.returncode == 1, result.stdout
    verdict, detail = checked(result)["database durability"]
    assert verdict == "FAIL"
    assert detail.startswith("synchronous_commit = off: a crash of the database server can ")
    assert detail.endswith("(docs/deploy.md, Durability)")
    assert checked(result)["database"][0] == "ok"  # reachable all the same


def test_check_refuses_what_would_be_unsafe_or_unreachable(env: dict[str, str]) -> None:
    problems = {
        "PAYSIGN_BASE_URL": "http://pay.example.com",
        "PAYSIGN_TESTNET_RPC_URL": f"http://127.0.0.1:{free_port()}/?apikey={RPC_SECRET}",
    }
    result = paysign({**env, **problems}, "check")
    assert result.returncode == 1
    lines = checked(result)
    assert lines["PAYSIGN_BASE_URL"][0] == "FAIL" and "not https" in lines["PAYSIGN_BASE_URL"][1]
    assert lines["testnet RPC"][0] == "FAIL" and "does not answer" in lines["testnet RPC"][1]
    assert RPC_SECRET not in result.stdout + result.stderr

    public = {
        f"PAYSIGN_{name}": f"https://pay.example.com/{name.lower()}"
        for name in (
            "BASE_URL",
            "CATALOG_URL",
            "CATALOG_FILE_URL",
            "MCP_URL",
            "AUTH_URL",
            "PROBLEM_BASE",
        )
    }
    behind_tls = checked(paysign({**env, **public}, "check"))
    assert behind_tls["PAYSIGN_BASE_URL"] == ("ok", "https://pay.example.com/base_url")
    assert behind_tls["PAYSIGN_TRUSTED_PROXIES"][0] == "warn"
    trusted = paysign({**env, **public, "PAYSIGN_TRUSTED_PROXIES": "127.0.0.1"}, "check")
    assert trusted.returncode == 0, trusted.stdout
    assert "PAYSIGN_TRUSTED_PROXIES" not in checked(trusted)


def test_check_names_an_unreachable_database_without_its_password(env: dict[str, str]) -> None:
    password, port = "pAsSwOrD" + secrets.token_hex(4), free_port()
    url = f"postgresql://paysign:{password}@127.0.0.1:{port}/paysign"
    result = paysign({**env, "PAYSIGN_DATABASE_URL": url}, "check")
    assert result.returncode == 1
    verdict, detail = checked(result)["database"]
    assert verdict == "FAIL" and detail.startswith(f"postgresql at 127.0.0.1:{port}/paysign: ")
    assert password not in result.stdout + result.stderr


def test_an_unknown_setting_value_is_named_without_a_traceback(env: dict[str, str]) -> None:
    result = paysign({**env, "PAYSIGN_LOG_LEVEL": "verbose"}, "check")
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL settings: PAYSIGN_LOG_LEVEL: ")
    assert "Traceback" not in result.stderr


def test_migrate_applies_every_migration_and_status_says_where_the_schema_is(
    env: dict[str, str], tmp_path: Path
) -> None:
    sqlite = "PAYSIGN_DATABASE_URL" not in env
    fresh = ok_json(paysign(env, "migrate", "--status"))
    if sqlite:
        assert fresh == {"database": f"sqlite at {tmp_path}/var/paysign.db", "exists": False}
        assert not (tmp_path / "var").exists()
    else:
        assert (fresh["current"], fresh["pending"], fresh["upToDate"]) == (None, REVISIONS, False)

    applied = ok_json(paysign(env, "migrate"))
    assert (applied["before"], applied["current"], applied["applied"]) == (None, HEAD, REVISIONS)
    again = ok_json(paysign(env, "migrate"))
    assert (again["before"], again["current"], again["applied"]) == (HEAD, HEAD, [])

    with ServeProcess(env):  # a service started on the migrated database finds nothing to do
        status = ok_json(paysign(env, "migrate", "--status"))
    assert (status["current"], status["head"], status["pending"], status["upToDate"]) == (
        HEAD,
        HEAD,
        [],
        True,
    )


def test_a_schema_from_a_newer_version_is_refused_and_left_alone(env: dict[str, str]) -> None:
    ok_json(paysign(env, "migrate"))
    set_revision(env, "9999")  # what a newer paysign's migration would have left
    status = paysign(env, "migrate", "--status")
    assert status.returncode == 1 and '"current":"9999"' in status.stdout
    assert "a newer version migrated it" in status.stderr
    refused = paysign(env, "migrate")
    assert refused.returncode == 1 and "a newer version migrated it" in refused.stderr
    assert "Traceback" not in refused.stderr
    served = paysign(env, "serve", "--port", str(free_port()))
    assert served.returncode == 1 and "a newer version migrated it" in served.stderr
    assert "Traceback" not in served.stderr
    check = paysign(env, "check")
    assert check.returncode == 1
    assert checked(check)["database"][0] == "FAIL"
    assert "does not know" in checked(check)["database"][1]
    set_revision(env, HEAD)
    assert ok_json(paysign(env, "migrate", "--status"))["upToDate"] is True
