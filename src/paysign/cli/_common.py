"""What every operator command shares: JSON on stdout, refusals on stderr, the runtime."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NoReturn

import click
import orjson

from paysign.bootstrap import Runtime, build_runtime
from paysign.config import Settings
from paysign.custody import InvalidMasterKey
from paysign.datadir import DataDirExposed
from paysign.errors import InvalidCatalog, InvalidPolicy, PaysignError
from paysign.logging import configure_logging
from paysign.services.availability import database_unavailable

#: A policy of 10,000 rules is about 0.5 MB, a catalog of a thousand listings a few: far more
#: is a mistake (or a device such as /dev/zero), refused before it fills the memory.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024


def emit(obj: dict[str, Any]) -> None:
    click.echo(orjson.dumps(obj).decode())


def iso(unix_seconds: int) -> str:
    return datetime.fromtimestamp(unix_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_json(path: str, invalid: type[InvalidCatalog] | type[InvalidPolicy]) -> object:
    """A JSON file (``-``: standard input) of at most ``MAX_DOCUMENT_BYTES``; ``invalid``
    names the document on a parse error."""
    if path != "-" and not stat.S_ISREG(os.stat(path).st_mode):
        raise invalid("", f"{path} is not a regular file")
    with click.open_file(path, "rb") as handle:
        raw = handle.read(MAX_DOCUMENT_BYTES + 1)
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise invalid("", f"the file is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid("", f"the file is not valid JSON ({exc})") from None


def runtime() -> Runtime:
    return built(Settings())


def built(settings: Settings) -> Runtime:
    # Log lines (a data directory tightened) go to stderr: stdout is the command's JSON.
    configure_logging("warning")
    try:
        # A database the service already uses may be sealed under its PAYSIGN_MASTER_KEY,
        # which this shell may lack: never create a second key for it here.
        return build_runtime(settings, key_only_for_new_database=True)
    except (DataDirExposed, InvalidMasterKey) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        _database_unavailable(exc)


def run(action: Callable[[], None]) -> None:
    """Run ``action``; a refusal prints ``error: <detail>`` on stderr and exits 1."""
    try:
        action()
    except PaysignError as exc:
        click.echo(f"error: {exc.detail}", err=True)
        sys.exit(1)
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        _database_unavailable(exc)


def _database_unavailable(exc: Exception) -> NoReturn:
    # The exception's type only: a driver's message can quote the connection string.
    click.echo(
        f"error: the database is unavailable ({type(exc).__name__}); nothing was changed. "
        "Check that it runs and that PAYSIGN_DATABASE_URL names it (paysign check says more).",
        err=True,
    )
    sys.exit(1)
