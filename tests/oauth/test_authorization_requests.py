"""Each authorization request is stored until it expires, before anyone signs in, so what one
network can leave in the database is bounded, on both databases: ``state`` is at most 512
characters, and a network makes at most 60 requests in a request's lifetime. Unbounded, 3,000
anonymous requests with a 15 KB ``state`` grew the database from 0.4 to 53.7 MB."""

from __future__ import annotations

import httpx
import sqlalchemy as sa

from paysign.services.oauth_grants import AUTHORIZATIONS_PER_NETWORK
from paysign.store.schema import oauth_requests

from .conftest import Service, pkce, register
from .test_oauth import authorization_url


def _stored(service: Service) -> int:
    with service.runtime.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(oauth_requests)).scalar())


def test_a_long_state_is_refused_and_nothing_is_stored(service: Service) -> None:
    client = register(service).json()
    _, challenge = pkce()
    long = authorization_url(service, client["client_id"], challenge, state="s" * 15_000)
    refused = httpx.get(long)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == "invalid_request"
    assert "state is longer than 512" in refused.json()["error_description"]
    fits = authorization_url(service, client["client_id"], challenge, state="s" * 512)
    assert httpx.get(fits).status_code == 302
    assert _stored(service) == 1


def test_one_network_makes_a_bounded_number_of_requests(service: Service) -> None:
    client = register(service).json()
    _, challenge = pkce()
    url = authorization_url(service, client["client_id"], challenge)
    with httpx.Client(timeout=10) as http:
        answers = [http.get(url).status_code for _ in range(AUTHORIZATIONS_PER_NETWORK)]
        assert answers == [302] * AUTHORIZATIONS_PER_NETWORK
        limited = http.get(url)
        assert limited.status_code == 429, limited.text
        assert limited.json()["error"] == "temporarily_unavailable"
        assert 0 < int(limited.headers["retry-after"]) <= 600
        assert _stored(service) == AUTHORIZATIONS_PER_NETWORK
        service.clock.advance(service.runtime.settings.oauth_sign_in_ttl_seconds + 1)
        assert http.get(url).status_code == 302  # a new window; the old requests expired
    assert _stored(service) == 1
