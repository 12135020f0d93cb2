"""RequestBodies (services/request_bodies.py): a body's bytes are decoded and validated once,
only valid bodies are kept, and the cache stays bounded, also under threads."""

from __future__ import annotations

import threading

import orjson
import pytest

from conftest import REGISTRY, signature_body
from paysign.errors import MalformedRequest, UnsupportedPaymentTerms
from paysign.protocol import parse_signature_request
from paysign.services.request_bodies import RequestBodies


def raw(amount: int = 10_000, *, scheme: str = "exact") -> bytes:
    body = signature_body(amount=str(amount))
    body["paymentRequired"]["accepts"][0]["scheme"] = scheme  # type: ignore[index]
    return orjson.dumps(body)


def test_the_same_bytes_are_validated_once_and_equal_a_fresh_parse() -> None:
    bodies = RequestBodies(REGISTRY)
    first = bodies.validated(raw())
    assert bodies.validated(raw()) is first
    assert first == parse_signature_request(orjson.loads(raw()), REGISTRY)
    other = bodies.validated(raw(amount=20_000))
    assert other.terms.amount == 20_000 and first.terms.amount == 10_000
    assert len(bodies) == 2


def test_invalid_bodies_raise_every_time_and_are_not_kept() -> None:
    bodies = RequestBodies(REGISTRY)
    for _ in range(2):
        with pytest.raises(MalformedRequest, match="not valid JSON"):
            bodies.validated(b'{"sellerUrl": ')
        with pytest.raises(UnsupportedPaymentTerms):
            bodies.validated(raw(scheme="upto"))
    assert len(bodies) == 0


def test_the_least_recently_used_body_goes_first() -> None:
    bodies = RequestBodies(REGISTRY, capacity=2)
    a, b, c = raw(1), raw(2), raw(3)
    kept_a = bodies.validated(a)
    bodies.validated(b)
    bodies.validated(a)  # a is now the most recent
    bodies.validated(c)  # so b goes
    assert len(bodies) == 2
    assert bodies.validated(a) is kept_a
    kept_b = bodies.validated(b)  # validated again, and c goes
    assert bodies.validated(b) is kept_b
    assert bodies.validated(a) is kept_a


def test_a_long_body_is_validated_but_not_kept() -> None:
    bodies = RequestBodies(REGISTRY, max_kept_bytes=len(raw()) - 1)
    assert bodies.validated(raw()).terms.amount == 10_000
    assert bodies.validated(raw()) is not bodies.validated(raw())
    assert len(bodies) == 0


def test_threads_sharing_it_get_their_own_bodies_and_it_stays_bounded() -> None:
    bodies = RequestBodies(REGISTRY, capacity=16)
    errors: list[BaseException] = []

    def hammer(offset: int) -> None:
        try:
            for i in range(400):
                amount = 1 + (i * 7 + offset) % 40
                assert bodies.validated(raw(amount)).terms.amount == amount
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(bodies) == 16
