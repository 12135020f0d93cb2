"""Data at rest is the service user's alone: the data directory (database, its WAL, the master
key, the dev chain's state) is 0700 all the way down and every file in it 0600, whether the
service made the directory or the operator made it looser; one it cannot make private (another
user's) is refused. Real ``paysign serve`` processes and the real dev chain."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx
import pytest

from conftest import ServeProcess, ok_json, paysign
from paysign.chain.devchain import Devchain
from paysign.chain.treasury import FileLock
from paysign.datadir import DataDirExposed, make_private_file, secure_data_dir
from paysign.store.database import Database
from paysign.store.migrate import migrate

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def loose_modes(root: Path) -> list[str]:
    """Every directory under ``root`` (itself included) that is not 0700 and every file that is
    not 0600, as ``path mode``; sockets are not data and are left out."""
    found = []
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        mode = stat.S_IMODE(st.st_mode)
        wanted = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600 if stat.S_ISREG(st.st_mode) else None
        if wanted is not None and mode != wanted:
            found.append(f"{path} {mode:04o}")
    return found


def use_the_service(env: dict[str, str], url: str) -> None:
    """Enough to make every kind of file: the database and its WAL, the master key, the dev
    chain's state and locks, a test-funds transfer."""
    email = "owner@example.com"
    ok_json(
        paysign(env, "admin", "create-account", "--email", email, "--password", "long enough pass")
    )
    key = ok_json(paysign(env, "admin", "issue-key", "--email", email))["apiKey"]
    funded = httpx.post(
        f"{url}/wallets/testnet/funds", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    assert funded.status_code == 200, funded.text


@pytest.mark.slow
@SQLITE_ONLY
def test_a_fresh_data_dir_is_private(env: dict[str, str], tmp_path: Path) -> None:
    data_dir = tmp_path / "var"
    with ServeProcess(env) as url:
        use_the_service(env, url)
        # While it runs: the WAL and shared-memory files exist now.
        assert (data_dir / "paysign.db-wal").exists()
        assert loose_modes(data_dir) == []
    assert loose_modes(data_dir) == []
    assert {p.name for p in data_dir.iterdir()} >= {"paysign.db", "master.key", "devchain"}


@pytest.mark.slow
@SQLITE_ONLY
def test_a_loose_data_dir_is_tightened(env: dict[str, str], tmp_path: Path) -> None:
    data_dir = tmp_path / "var"
    (data_dir / "devchain").mkdir(parents=True)
    data_dir.chmod(0o757)  # even writable by others
    (data_dir / "devchain").chmod(0o775)
    for name, mode in (("paysign.db", 0o644), ("paysign.db-wal", 0o644), ("notes.txt", 0o666)):
        (data_dir / name).touch()
        (data_dir / name).chmod(mode)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.touch()
    elsewhere.chmod(0o644)
    (data_dir / "link").symlink_to(elsewhere)
    assert len(loose_modes(data_dir)) == 5

    server = ServeProcess(env)
    with server as url:
        use_the_service(env, url)
        assert loose_modes(data_dir) == []
        log = server.output().decode()
    assert "data_dir_tightened" in log and str(data_dir) in log
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o644  # a link's target is not ours


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's needs root")
@SQLITE_ONLY
@pytest.mark.parametrize("foreign", ["dir", "file"])
def test_a_data_dir_it_cannot_make_private_is_refused(
    env: dict[str, str], tmp_path: Path, foreign: str
) -> None:
    data_dir = tmp_path / "var"
    data_dir.mkdir()
    data_dir.chmod(0o755)
    db_file = data_dir / "paysign.db"
    db_file.touch()
    db_file.chmod(0o644)
    nobody = 65534
    os.chown(data_dir if foreign == "dir" else db_file, nobody, nobody)

    served = paysign(env, "serve", "--port", "0")
    assert served.returncode != 0
    assert "other users" in served.stderr and str(data_dir) in served.stderr, served.stderr
    assert f"uid {nobody}" in served.stderr
    assert "Traceback" not in served.stderr
    admin = paysign(
        env, "admin", "create-account", "--email", "a@example.com", "--password", "p" * 12
    )
    assert admin.returncode == 1 and "other users" in admin.stderr
    # Nothing was started or written on the way to the refusal.
    assert not (data_dir / "devchain").exists() and not (data_dir / "master.key").exists()
    if foreign == "dir":
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o755  # another user's: left to them


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's needs root")
@SQLITE_ONLY
@pytest.mark.parametrize("planted", ["data dir", "database", "master key"])
def test_another_users_private_path_is_refused(
    env: dict[str, str], tmp_path: Path, planted: str
) -> None:
    """A local user who pre-creates the data directory (or a file in it) with a tight mode,
    e.g. with a master key they know, must not get the wallets sealed under it."""
    data_dir = tmp_path / "var"
    data_dir.mkdir(mode=0o700)
    known_key = "A" * 43 + "\n"
    (data_dir / "master.key").write_text(known_key)
    (data_dir / "master.key").chmod(0o600)
    nobody = 65534
    owned_by_nobody = {
        "data dir": [data_dir, data_dir / "master.key"],
        "database": [data_dir / "paysign.db"],
        "master key": [data_dir / "master.key"],
    }[planted]
    if planted == "database":
        (data_dir / "paysign.db").touch(mode=0o600)
    for path in owned_by_nobody:
        os.chown(path, nobody, nobody)

    admin = paysign(
        env, "admin", "create-account", "--email", "a@example.com", "--password", "p" * 12
    )
    assert admin.returncode == 1, admin.stdout
    assert f"uid {nobody}" in admin.stderr and "Traceback" not in admin.stderr, admin.stderr
    assert admin.stdout == ""
    served = paysign(env, "serve", "--port", "0")
    assert served.returncode != 0
    assert f"uid {nobody}" in served.stderr and "Traceback" not in served.stderr, served.stderr
    checked = paysign(env, "check")
    assert checked.returncode != 0
    assert "Traceback" not in checked.stderr, checked.stderr
    assert (data_dir / "master.key").read_text() == known_key  # left for the operator to judge


def test_a_private_data_dir_of_another_uid_is_refused_without_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same refusal seen from a service whose uid is not the directory's (no chown needed)."""
    data_dir = tmp_path / "var"
    data_dir.mkdir(mode=0o700)
    (data_dir / "paysign.db").touch(mode=0o600)
    monkeypatch.setattr(os, "geteuid", lambda: data_dir.stat().st_uid + 1)
    with pytest.raises(DataDirExposed, match="belongs to uid"):
        secure_data_dir(data_dir)
    with pytest.raises(DataDirExposed, match="belongs to uid"):
        make_private_file(data_dir / "paysign.db")


def test_the_dev_chain_on_a_fresh_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "new" / "var"
    with Devchain(data_dir, dump_interval=60) as chain:
        chain.dump(force=True)
        assert loose_modes(data_dir) == []
    assert loose_modes(data_dir) == []
    assert (data_dir / "devchain" / "state.json").exists()


def test_the_treasury_lock_on_a_fresh_data_dir(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "var" / "treasury.lock")
    with lock():
        pass
    assert loose_modes(tmp_path / "var") == []


def test_an_sqlite_database_and_its_wal_are_private(tmp_path: Path) -> None:
    fresh, loose = tmp_path / "fresh", tmp_path / "loose"
    for directory in (fresh, loose):
        directory.mkdir(mode=0o700)
    (loose / "paysign.db").touch(mode=0o644)
    (loose / "paysign.db-shm").touch(mode=0o666)
    assert len(loose_modes(loose)) == 2
    for directory in (fresh, loose):
        db = Database(f"sqlite:///{directory / 'paysign.db'}")
        try:
            migrate(db)
            with db.write() as conn:
                conn.exec_driver_sql("select 1")
            assert (directory / "paysign.db-wal").exists()
            assert loose_modes(directory) == []
        finally:
            db.dispose()
