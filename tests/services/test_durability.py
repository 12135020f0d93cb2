"""Whether the database could take back answered signatures in a crash, read from a real
PostgreSQL as the service's own connections see it: directly, with a connection option that
turns synchronous commit off, and through a real PgBouncer in transaction pooling mode."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from structlog.testing import capture_logs

from conftest import NOT_DURABLE_URL_OPTION, free_port
from paysign.services.config_check import Verdict, durability_line
from paysign.services.durability import (
    DatabaseDurability,
    database_durability,
    warn_if_not_durable,
)
from paysign.store.database import Database
from pgbouncer_support import pgbouncer as pgbouncer  # the fixture
from pgbouncer_support import runtime_behind

DEFAULTS = DatabaseDurability(fsync="on", synchronous_commit="on", full_page_writes="on")


def test_sqlite_has_no_server_settings_to_read(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'paysign.db'}")
    try:
        assert database_durability(db) is None
    finally:
        db.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_connection_option_that_skips_the_log_flush_is_seen(database_url: str) -> None:
    durable = Database(database_url)
    not_durable = Database(database_url + NOT_DURABLE_URL_OPTION)
    try:
        assert database_durability(durable) == DEFAULTS
        assert DEFAULTS.losses == () and DEFAULTS.cautions == ()
        found = database_durability(not_durable)
        assert found is not None and found.synchronous_commit == "off"
        assert [loss.split(":")[0] for loss in found.losses] == ["synchronous_commit = off"]
    finally:
        durable.dispose()
        not_durable.dispose()


def test_every_setting_that_loses_commits_is_named() -> None:
    careless = DatabaseDurability(fsync="off", synchronous_commit="off", full_page_writes="off")
    assert [loss.split(":")[0] for loss in careless.losses] == [
        "fsync = off",
        "synchronous_commit = off",
    ]
    assert [caution.split(":")[0] for caution in careless.cautions] == ["full_page_writes = off"]
    for durable_mode in ("local", "remote_write", "remote_apply", "on"):
        assert DatabaseDurability("on", durable_mode, "on").losses == ()


def test_the_settings_are_read_behind_pgbouncer_in_transaction_mode(
    pgbouncer: str, tmp_path: Path
) -> None:
    runtime = runtime_behind(pgbouncer, tmp_path, pooler=True)
    try:
        for _ in range(3):  # each on whichever server connection the pooler hands out
            assert database_durability(runtime.db) == DEFAULTS
    finally:
        runtime.db.dispose()


def test_paysign_check_fails_a_loss_and_warns_of_a_caution() -> None:
    assert durability_line(DEFAULTS).verdict is Verdict.OK
    no_full_pages = DatabaseDurability(fsync="on", synchronous_commit="on", full_page_writes="off")
    line = durability_line(no_full_pages)
    assert line.verdict is Verdict.WARN and line.detail.startswith("full_page_writes = off: ")
    careless = DatabaseDurability(fsync="off", synchronous_commit="on", full_page_writes="off")
    line = durability_line(careless)  # a loss outranks a caution
    assert line.verdict is Verdict.FAIL and line.detail.startswith("fsync = off: a power loss ")


def test_a_database_that_cannot_be_asked_is_left_to_readiness_at_start() -> None:
    """The start goes on and says nothing of durability: /readyz reports the outage."""
    unreachable = Database(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/paysign")
    try:
        with capture_logs() as logs:
            assert warn_if_not_durable(unreachable) is False
        assert logs == []
        with pytest.raises(sa.exc.OperationalError):
            database_durability(unreachable)  # what the start does not let through
    finally:
        unreachable.dispose()
