"""What the server does to its process before serving: the start-up heap is left out of later
collections, and the youngest generation is collected less often."""

from __future__ import annotations

import gc

from paysign.server_start import (
    YOUNG_COLLECTION_THRESHOLD,
    freeze_startup_heap,
    space_young_collections,
    tune_gc_for_serving,
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


def test_tuning_for_serving_freezes_the_heap_and_spaces_young_collections() -> None:
    before = gc.get_threshold()
    gc.unfreeze()
    try:
        gc.set_threshold(700, 7, 9)
        tune_gc_for_serving()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, 7, 9)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
