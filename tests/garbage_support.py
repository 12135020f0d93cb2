"""Finding the reference cycles that paysign's own code leaves to the garbage collector."""

from __future__ import annotations

import collections
import contextlib
import gc
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def unreachable_after() -> Iterator[list[object]]:
    """The objects that what runs in the block leaves unreachable, as the collector finds
    them once the block is over (it does not run in the block)."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[object] = []
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def of_paysign(garbage: list[object]) -> list[object]:
    """The garbage's connected parts that hold a frame of paysign's code or an object of one
    of its types. The collector sees the whole test process: another thread (an earlier
    test's HTTP client) may drop a cycle of its own in the meantime."""
    by_id = {id(o): o for o in garbage}
    part = {i: i for i in by_id}

    def root(i: int) -> int:
        while part[i] != i:
            part[i] = part[part[i]]
            i = part[i]
        return i

    for o in garbage:
        for referent in gc.get_referents(o):
            if id(referent) in by_id:
                part[root(id(o))] = root(id(referent))
    parts: dict[int, list[object]] = collections.defaultdict(list)
    for i, o in by_id.items():
        parts[root(i)].append(o)
    return [o for members in parts.values() if any(map(is_paysigns, members)) for o in members]


def is_paysigns(o: object) -> bool:
    if isinstance(o, FrameType):
        return "/paysign/" in o.f_code.co_filename
    return type(o).__module__.startswith("paysign.")


def described(garbage: list[object]) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The most common types and frames in ``garbage``: what they are, never their values (a
    request's headers hold an API key)."""
    frames = collections.Counter(o.f_code.co_qualname for o in garbage if type(o) is FrameType)
    kinds = collections.Counter(type(o).__name__ for o in garbage)
    return kinds.most_common(8), frames.most_common(8)
