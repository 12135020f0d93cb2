"""Progress lines on stderr, so that stdout carries nothing but the report."""

from __future__ import annotations

import sys


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
