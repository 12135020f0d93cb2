"""A confidential client's secret is kept as its SHA-256 only, on both databases: a copy of the
database holds no secret that authenticates at the token endpoint, the client goes on
authenticating with the one it holds, and reading the registration (RFC 7592) issues a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import FrozenClock, migrate_to
from paysign.services.oauth_clients import Registrations
from paysign.store.database import Database
from paysign.store.schema import oauth_clients

from .conftest import Service, User, register
from .test_basic_client_auth import basic, basic_client, exchanged_with_basic
from .test_oauth import exchanged_code


def _stored(service: Service) -> list[str]:
    """Every value of every registered client's row, as a database copy holds it."""
    with service.runtime.db.read() as conn:
        rows = conn.execute(oauth_clients.select()).all()
    return [str(value) for row in rows for value in row]


def _refresh_token(service: Service, user: User, client: dict[str, Any]) -> str:
    """A refresh token of ``client``, its code exchanged with its credentials in the form."""
    exchanged = exchanged_code(service, user, client)
    assert exchanged.status_code == 200, exchanged.text
    return str(exchanged.json()["refresh_token"])


def _basic_refresh_token(service: Service, user: User, client: dict[str, Any]) -> str:
    exchanged = exchanged_with_basic(service, user, client)
    assert exchanged.status_code == 200, exchanged.text
    return str(exchanged.json()["refresh_token"])


def _refresh(service: Service, refresh_token: str, **auth: Any) -> httpx.Response:
    return httpx.post(
        f"{service.auth_url}/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            **auth.get("data", {}),
        },
        auth=auth.get("auth"),
    )


def _post(client: dict[str, Any], secret: str) -> dict[str, Any]:
    return {"data": {"client_id": client["client_id"], "client_secret": secret}}


def test_the_database_holds_no_client_secret_that_authenticates(
    service: Service, user: User
) -> None:
    client = register(service).json()
    secret = client["client_secret"]
    refresh_token = _refresh_token(service, user, client)
    stored = _stored(service)
    assert not any(secret in value for value in stored)

    # Whatever the copy holds, presented as the secret, is refused; the real one works.
    digest = hashlib.sha256(secret.encode()).hexdigest()
    assert any(digest in value for value in stored)
    for taken in (digest, f"sha256:{digest}", ""):
        refused = _refresh(service, refresh_token, **_post(client, taken))
        assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    assert _refresh(service, refresh_token, **_post(client, secret)).status_code == 200


def test_a_basic_client_authenticates_against_the_digest(service: Service, user: User) -> None:
    client = basic_client(service)
    secret = client["client_secret"]
    refresh_token = _basic_refresh_token(service, user, client)
    assert not any(secret in value for value in _stored(service))
    wrong = _refresh(service, refresh_token, auth=basic(client["client_id"], secret[:-1]))
    assert wrong.status_code == 401
    other_id = _refresh(service, refresh_token, auth=basic("someone-else", secret))
    assert other_id.status_code == 401
    good = _refresh(service, refresh_token, auth=basic(client["client_id"], secret))
    assert good.status_code == 200, good.text


def test_reading_the_registration_issues_a_new_secret_and_retires_the_old(
    service: Service, user: User
) -> None:
    client = register(service).json()
    old = client["client_secret"]
    refresh_token = _refresh_token(service, user, client)
    read = httpx.get(
        client["registration_client_uri"],
        headers={"Authorization": f"Bearer {client['registration_access_token']}"},
    )
    assert read.status_code == 200 and read.headers["cache-control"] == "no-store"
    document = read.json()
    new = document["client_secret"]
    assert new != old and len(new) == 64 and "client_secret_sha256" not in document
    assert document["client_name"] == "Test Assistant"
    assert _refresh(service, refresh_token, **_post(client, old)).status_code == 401
    assert _refresh(service, refresh_token, **_post(client, new)).status_code == 200


def test_a_public_client_has_no_secret_to_read_or_rotate(service: Service) -> None:
    client = register(service, token_endpoint_auth_method="none").json()
    assert "client_secret" not in client
    read = httpx.get(
        client["registration_client_uri"],
        headers={"Authorization": f"Bearer {client['registration_access_token']}"},
    )
    assert read.status_code == 200 and "client_secret" not in read.json()


@pytest.fixture
def database_at_0019(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    migrate_to(database, "0019")
    yield database
    database.dispose()


def test_the_upgrade_keeps_the_digest_of_a_stored_secret(
    database_at_0019: Database, clock: FrozenClock
) -> None:
    """Clients stored with their secret before the upgrade go on authenticating with it."""
    db = database_at_0019
    plain = {"client_id": "old-client", "client_secret": "an old secret", "client_name": "Old"}
    public = {"client_id": "old-public", "token_endpoint_auth_method": "none"}
    with db.write() as conn:
        for metadata in (plain, public):
            conn.execute(
                oauth_clients.insert().values(
                    client_id=metadata["client_id"],
                    metadata=json.dumps(metadata),
                    registration_token_hash="0" * 64,
                    created_at=1,
                )
            )
    migrate_to(db, "head")
    with db.read() as conn:
        stored = {
            row.client_id: json.loads(row.metadata) for row in conn.execute(oauth_clients.select())
        }
    assert "client_secret" not in stored["old-client"] and stored["old-client"]["client_name"]
    assert stored["old-public"] == public
    registrations = Registrations(db, clock)
    assert registrations.secret_matches("old-client", "an old secret")
    assert not registrations.secret_matches("old-client", "another secret")
    assert not registrations.secret_matches("old-public", "")
