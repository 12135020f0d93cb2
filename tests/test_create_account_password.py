"""The holder's password reaches ``paysign admin create-account`` without appearing on its
command line (where every local user can read it): from a file, standard input or a hidden
prompt. Real processes, real files, real SQLite."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import ok_json, paysign
from paysign.cli import _common, main, password_input
from paysign.config import Settings
from paysign.services.accounts import verify_password
from paysign.store import repositories as repo
from paysign.store.database import Database

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
PASSWORD = "a passphrase kept off argv"


def password_works(data_dir: Path, email: str, password: str) -> bool:
    db = Database(Settings(data_dir=data_dir, database_url=None).resolved_database_url)
    try:
        with db.read() as conn:
            account = repo.find_account_by_email(conn, email)
    finally:
        db.dispose()
    assert account is not None
    return verify_password(account, password)


def create_account(
    env: dict[str, str], email: str, *password_args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``paysign admin create-account --email EMAIL PASSWORD_ARGS...``, as a process."""
    return paysign(env, "admin", "create-account", "--email", email, *password_args, stdin=stdin)


@SQLITE_ONLY
def test_password_from_a_file_keeps_it_off_the_command_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    secret_file = tmp_path / "password"
    secret_file.write_text(PASSWORD + "\n")
    args = ("admin", "create-account", "--email", "file@example.com", "--password-file")
    ok_json(paysign(env, *args, str(secret_file)))
    assert PASSWORD not in " ".join(args)
    assert password_works(tmp_path / "var", "file@example.com", PASSWORD)


@SQLITE_ONLY
def test_password_from_standard_input_is_its_first_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    created = create_account(
        env, "stdin@example.com", "--password-file", "-", stdin=PASSWORD + "\nignored line\n"
    )
    ok_json(created)
    assert password_works(tmp_path / "var", "stdin@example.com", PASSWORD)


@SQLITE_ONLY
def test_without_a_password_or_a_terminal_it_refuses(env: dict[str, str]) -> None:
    refused = paysign(env, "admin", "create-account", "--email", "none@example.com", stdin="")
    assert refused.returncode != 0
    assert "--password-file" in refused.stderr
    assert refused.stdout == ""


def test_in_a_terminal_it_asks_twice_without_echo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYSIGN_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setattr(password_input, "stdin_is_terminal", lambda: True)
    # In this process, the command's logging set-up would stay for the tests after this one.
    monkeypatch.setattr(_common, "configure_logging", lambda level: None)
    result = CliRunner().invoke(
        main,
        ["admin", "create-account", "--email", "prompt@example.com"],
        input=f"{PASSWORD}\n{PASSWORD}\n",
    )
    assert result.exit_code == 0, result.output
    assert PASSWORD not in result.output  # hidden input is not echoed
    assert password_works(tmp_path / "var", "prompt@example.com", PASSWORD)


@SQLITE_ONLY
def test_the_command_line_password_still_works_for_scripts(
    env: dict[str, str], tmp_path: Path
) -> None:
    args = ("admin", "create-account", "--email", "argv@example.com", "--password", PASSWORD)
    ok_json(paysign(env, *args))
    assert password_works(tmp_path / "var", "argv@example.com", PASSWORD)


@SQLITE_ONLY
def test_a_password_given_twice_or_too_long_a_line_is_refused_and_creates_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    both = create_account(
        env,
        "both@example.com",
        "--password",
        PASSWORD,
        "--password-file",
        "-",
        stdin=PASSWORD + "\n",
    )
    assert both.returncode == 2 and "not both" in both.stderr
    endless = tmp_path / "endless"
    endless.write_text("x" * 5000)  # a file with no line break, such as a device's output
    long = create_account(env, "long@example.com", "--password-file", str(endless))
    assert long.returncode == 2 and "over 4096" in long.stderr
    listed = ok_json(paysign(env, "admin", "list-accounts", "--json"))
    assert listed["accounts"] == []
