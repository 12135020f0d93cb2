from __future__ import annotations

import time

from paysign.services.signing import time_ordered_nonce


def test_nonces_are_32_bytes_unique_and_grow_with_time() -> None:
    before = time.time_ns() // 1_000_000
    nonces = [time_ordered_nonce() for _ in range(10_000)]
    after = time.time_ns() // 1_000_000
    assert all(len(n) == 32 for n in nonces)
    assert len(set(nonces)) == len(nonces)
    stamps = [int.from_bytes(n[:6], "big") for n in nonces]
    assert stamps == sorted(stamps)
    assert before <= stamps[0] and stamps[-1] <= after
    # The random part really is random: no two share it.
    assert len({n[6:] for n in nonces}) == len(nonces)
