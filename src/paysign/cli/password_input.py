"""Where ``paysign admin create-account`` and ``reset-password`` read the holder's password
from.

A password on the command line is readable by every local user (``/proc/<pid>/cmdline``) and
lands in shell history, so the safe forms are a file (``-``: standard input) or a hidden prompt;
``--password`` stays for scripts that already use it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

# Far above any allowed password (services.accounts.MAX_PASSWORD_LENGTH): enough to read the
# first line of a password file, never a whole device such as /dev/zero.
_MAX_LINE_CHARS = 4096


def password_file_option(command: F) -> F:
    """The ``--password-file FILE`` option every command taking a holder's password has."""
    return click.option(
        "--password-file",
        metavar="FILE",
        help="Read the password from the first line of FILE (- reads standard input).",
    )(command)


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def _first_line(path: str) -> str:
    with click.open_file(path, "r", encoding="utf-8") as handle:
        line: str = handle.readline(_MAX_LINE_CHARS + 1)
    if len(line) > _MAX_LINE_CHARS:
        raise click.UsageError(f"the first line of the password file is over {_MAX_LINE_CHARS}")
    return line.rstrip("\r\n")


def holder_password(password: str | None, password_file: str | None) -> str:
    """The password from ``--password``, ``--password-file`` or, in a terminal, a hidden prompt
    asked twice; a usage error when none of them can give one."""
    if password is not None and password_file is not None:
        raise click.UsageError("give --password or --password-file, not both")
    if password is not None:
        return password
    if password_file is not None:
        return _first_line(password_file)
    if stdin_is_terminal():
        entered: str = click.prompt("Holder's password", hide_input=True, confirmation_prompt=True)
        return entered
    raise click.UsageError(
        "no password: give --password-file FILE (- reads the first line of standard input), "
        "or run the command in a terminal to be asked for it"
    )
