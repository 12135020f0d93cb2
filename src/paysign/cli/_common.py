"""What every operator command shares: JSON on stdout, refusals on stderr, the runtime."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click
import orjson

from paysign.bootstrap import Runtime, build_runtime
from paysign.config import Settings
from paysign.custody import InvalidMasterKey
from paysign.datadir import DataDirExposed
from paysign.errors import InvalidCatalog, InvalidPolicy, PaysignError
from paysign.logging import configure_logging


def emit(obj: dict[str, Any]) -> None:
    click.echo(orjson.dumps(obj).decode())


def iso(unix_seconds: int) -> str:
    return datetime.fromtimestamp(unix_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_json(path: str, invalid: type[InvalidCatalog] | type[InvalidPolicy]) -> object:
    """A JSON file (``-``: standard input); ``invalid`` names the document on a parse error."""
    with click.open_file(path, "rb") as handle:
        raw = handle.read()
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
        return build_runtime(settings)
    except (DataDirExposed, InvalidMasterKey) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def run(action: Callable[[], None]) -> None:
    """Run ``action``; a refusal prints ``error: <detail>`` on stderr and exits 1."""
    try:
        action()
    except PaysignError as exc:
        click.echo(f"error: {exc.detail}", err=True)
        sys.exit(1)
