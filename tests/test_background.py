"""What the server does for itself: the start-up heap is left out of later collections, and
the youngest generation is collected less often."""

from __future__ import annotations

import gc

from paysign.background import (
    YOUNG_COLLECTION_THRESHOLD,
    freeze_startup_heap,
    space_young_collections,
)


def test_the_startup_heap_is_frozen_out_of_collections() -> None:
    built_at_startup = [[i] for i in range(1000)]
    gc.unfreeze()
    try:
        assert any(o is built_at_startup for o in gc.get_objects())
        freeze_startup_heap()
        assert gc.get_freeze_count() >= 1000
        # No generation holds it any more: a collection no longer walks it.
        assert not any(o is built_at_startup for o in gc.get_objects())
    finally:
        gc.unfreeze()


def test_young_collections_are_spaced_and_older_ones_kept() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 7, 9)
        space_young_collections()
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, 7, 9)
    finally:
        gc.set_threshold(*before)
