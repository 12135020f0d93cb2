"""Which spend windows a live signature reserved in beyond the day's and month's, as the short
text kept on its row (``signatures.reserved_in``), so that an expired one gives back exactly
there, whatever the policy says later.

The text is the hour window's start (or ``-`` when no hourly cap applied), then the text of
each budgeted allow rule it reserved under, separated by spaces (a rule never holds one: its
path is percent-encoded). NULL, on rows older than the column, means "not known".

    >>> text = encode(1789999200, [Rule("api.example.com", "/weather"), Rule("b.example", "/")])
    >>> text
    '1789999200 api.example.com/weather b.example'
    >>> decode(text) == ReservedWindows(1789999200, (Rule("api.example.com", "/weather"),
    ...                                               Rule("b.example", "/")))
    True
    >>> encode(None, ()), decode("-")
    ('-', ReservedWindows(hour_start=None, rules=()))
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from paysign.policy.rules import Rule

#: A signature that reserved in the day and month windows only (or, in the sandbox, nowhere).
NO_EXTRA_WINDOWS = "-"


@dataclass(frozen=True, slots=True)
class ReservedWindows:
    hour_start: int | None
    rules: tuple[Rule, ...]


def encode(hour_start: int | None, rules: Iterable[Rule]) -> str:
    parts = [NO_EXTRA_WINDOWS if hour_start is None else str(hour_start)]
    parts.extend(str(rule) for rule in rules)
    return " ".join(parts)


def decode(text: str) -> ReservedWindows:
    first, *rules = text.split(" ")
    hour_start = None if first == NO_EXTRA_WINDOWS else int(first)
    return ReservedWindows(hour_start, tuple(_rule(token) for token in rules))


def _rule(text: str) -> Rule:
    host, _, path = text.partition("/")
    return Rule(host, "/" + path)
