"""JSON from another party (a seller, a bazaar, a chain node), parsed without letting its
nesting crash the process.

The standard ``json`` module recurses on the C stack as deep as the interpreter's recursion
limit lets it, and a library paysign imports (py_ecc) raises that limit to 100,000: 200 kB of
``[`` from a seller then overflows the stack, and the whole server dies with a segmentation
fault where it should have raised. orjson stops at 1,024 levels with an error.

    >>> untrusted_json(b'{"x402Version": 1}')
    {'x402Version': 1}
    >>> untrusted_json(b"[" * 2_000 + b"]" * 2_000)
    Traceback (most recent call last):
    ...
    orjson.JSONDecodeError: depth limit exceeded: line 1 column 1026 (char 1025)
"""

from __future__ import annotations

from typing import Any

import orjson


def untrusted_json(data: bytes | str) -> Any:
    """``data`` parsed; ``ValueError`` (``orjson.JSONDecodeError``) when it is not JSON or is
    nested more than 1,024 deep. Integers past 64 bits come back as floats."""
    return orjson.loads(data)


__all__ = ["untrusted_json"]
