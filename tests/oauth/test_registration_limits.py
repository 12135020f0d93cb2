"""Dynamic client registration within bounds: the body's size, each field, the number of
redirect URIs, registrations per client address, and clients that never got a grant expire
(real HTTP and the storage itself, both databases)."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from paysign.bootstrap import Runtime
from paysign.services.oauth_clients import (
    MAX_BODY_BYTES,
    MAX_REDIRECT_URIS,
    RegistrationLimits,
    Registrations,
    address_key,
)
from paysign.services.oauth_refusals import TooManyRegistrations
from paysign.store.schema import accounts, oauth_clients, oauth_tokens

from .conftest import REDIRECT, Service, User, register
from .test_oauth import authorization_url, refresh, tokens_for


def _stored_clients(service: Service) -> int:
    with service.runtime.db.read() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(oauth_clients))
        return int(count.scalar_one())


def _refused_metadata(r: httpx.Response, status: int = 400) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"] == "invalid_client_metadata"
    return str(r.json()["error_description"])


def test_a_huge_body_is_refused_unread(service: Service) -> None:
    body = '{"client_name": "' + "A" * (5 * 1024 * 1024) + '", "redirect_uris": ["' + REDIRECT
    huge = httpx.post(
        f"{service.auth_url}/register",
        content=(body + '"]}').encode(),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert "64 KiB" in _refused_metadata(huge, 413)
    # Without a Content-Length (chunked), the body is cut off at the bound as it streams in.
    chunks = (b"[" + b" " * 8192 for _ in range(MAX_BODY_BYTES // 8192 + 2))
    streamed = httpx.post(
        f"{service.auth_url}/register",
        content=chunks,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    _refused_metadata(streamed, 413)
    assert _stored_clients(service) == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("client_name", "A" * 201),
        ("client_name", "Pay\u202eyrev"),  # a bidi override would disguise the name
        ("client_uri", "https://client.example/" + "a" * 2048),
        ("logo_uri", "https://client.example/" + "a" * 2048),
        ("contacts", [f"c{n}@client.example" for n in range(11)]),
        ("contacts", ["a" * 321]),
        ("software_id", "s" * 201),
        ("software_version", "1" * 201),
        ("jwks", {"keys": [{"k": "x" * 9000}]}),
        ("grant_types", ["authorization_code", *(f"urn:x:{n}" for n in range(10))]),
        ("redirect_uris", [f"https://client.example/{n}" for n in range(MAX_REDIRECT_URIS + 1)]),
        ("redirect_uris", ["https://client.example/" + "a" * 2048]),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None,
)
def test_fields_are_bounded(service: Service, field: str, value: Any) -> None:
    _refused_metadata(register(service, **{field: value}))
    assert _stored_clients(service) == 0


def test_fields_at_their_bounds_are_accepted(service: Service) -> None:
    r = register(
        service,
        client_name="A" * 200,
        client_uri="https://client.example/" + "a" * (2048 - 23),
        contacts=[f"c{n}@client.example" for n in range(10)],
        redirect_uris=[f"https://client.example/{n}" for n in range(MAX_REDIRECT_URIS)],
    )
    assert r.status_code == 201, r.text
    assert len(r.json()["redirect_uris"]) == MAX_REDIRECT_URIS


def test_registrations_per_address_are_limited(service: Service) -> None:
    limit = RegistrationLimits().per_address
    for _ in range(limit):
        assert register(service).status_code == 201
    limited = register(service)
    assert limited.status_code == 429, limited.text
    assert limited.json()["error"] == "temporarily_unavailable"
    assert 0 < int(limited.headers["retry-after"]) <= RegistrationLimits().window
    assert _stored_clients(service) == limit
    # Refused requests count too: a flood of bad ones is as limited as one of good ones.
    assert register(service, client_name="A" * 201).status_code == 429
    service.clock.advance(int(limited.headers["retry-after"]))
    assert register(service).status_code == 201


def test_the_limit_holds_under_concurrency(runtime: Runtime) -> None:
    """Simultaneous registrations from one address: exactly the limit gets through (the
    count is one guarded statement in the shared database, not process memory)."""
    registrations = Registrations(runtime.db, runtime.clock, RegistrationLimits(per_address=5))
    admitted: list[bool] = []
    start = threading.Barrier(12)

    def attempt() -> None:
        start.wait()
        try:
            registrations.admit("203.0.113.7")
            admitted.append(True)
        except TooManyRegistrations:
            admitted.append(False)

    threads = [threading.Thread(target=attempt) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert admitted.count(True) == 5 and admitted.count(False) == 7
    registrations.admit("203.0.113.8")  # another address has its own budget


def test_ipv6_addresses_are_counted_per_64() -> None:
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff::9")
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")
    assert address_key("::ffff:203.0.113.7") == address_key("203.0.113.7")
    assert address_key("203.0.113.7") != address_key("203.0.113.8")
    assert len(address_key("x" * 500)) <= 100  # a hostname (a test client) stays a key


def test_clients_that_never_got_a_grant_expire(service: Service, user: User) -> None:
    idle = register(service).json()
    granted, tokens = tokens_for(service, user)
    service.clock.advance(RegistrationLimits().ungranted_ttl + 1)
    fresh = register(service)  # registration purges, like a new request purges old ones
    assert fresh.status_code == 201
    read = httpx.get(
        idle["registration_client_uri"],
        headers={"Authorization": f"Bearer {idle['registration_access_token']}"},
    )
    assert read.status_code == 401
    r = httpx.get(authorization_url(service, idle["client_id"], "x" * 43))
    assert r.status_code == 400 and "location" not in r.headers
    assert _stored_clients(service) == 2
    # The client that was granted access keeps working.
    assert refresh(service, granted, tokens["refresh_token"]).status_code == 200


def test_the_migration_keeps_clients_that_already_hold_tokens(database_url: str) -> None:
    """Clients registered before the limits existed: one with a token must not expire as if
    it had never been granted access; one without may."""
    from alembic import command
    from alembic.config import Config

    from paysign.store.database import Database
    from paysign.store.migrate import MIGRATIONS, migrate

    db = Database(database_url)
    try:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with db.writer.connect() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "0006")
            conn.commit()
        with db.write() as conn:  # only columns revision 0006 has
            conn.execute(
                accounts.insert().values(
                    id="a1",
                    email="a@example.com",
                    password_hash="x",
                    sealed_totp_secret=b"\0",
                    created_at=1,
                )
            )
            for client in ("granted", "idle"):
                conn.execute(
                    oauth_clients.insert().values(
                        client_id=client,
                        metadata="{}",
                        registration_token_hash="h",
                        created_at=100,
                    )
                )
            conn.execute(
                oauth_tokens.insert().values(
                    token_hash="t",
                    kind="refresh",
                    family="f",
                    client_id="granted",
                    account_id="a1",
                    scopes="s",
                    resource="r",
                    expires_at=2**40,
                )
            )
        migrate(db)
        with db.read() as conn:
            rows = conn.execute(
                sa.select(oauth_clients.c.client_id, oauth_clients.c.granted_at).order_by(
                    oauth_clients.c.client_id
                )
            ).all()
        assert [tuple(r) for r in rows] == [("granted", 100), ("idle", None)]
    finally:
        db.dispose()
