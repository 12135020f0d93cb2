"""A refresh retried after a lost answer gets the same new pair; a rotated refresh token
presented any other way (after the grace, or once the new pair was used) is a replay and
revokes the whole grant. Tokens are stored only as hashes all along."""

from __future__ import annotations

import sqlalchemy as sa

from paysign.store.schema import oauth_tokens

from .conftest import Service, User
from .test_oauth import is_invalid_token, mcp_post, refresh, tokens_for


def _grace(service: Service) -> int:
    return service.runtime.settings.oauth_refresh_retry_grace_seconds


def test_a_retry_within_the_grace_gets_the_same_pair_and_keeps_the_grant(
    service: Service, user: User
) -> None:
    client, first = tokens_for(service, user)
    lost = refresh(service, client, first["refresh_token"])  # the answer the client never saw
    assert lost.status_code == 200, lost.text
    service.clock.advance(_grace(service) - 1)
    retried = refresh(service, client, first["refresh_token"])
    assert retried.status_code == 200, retried.text
    assert retried.json()["access_token"] == lost.json()["access_token"]
    assert retried.json()["refresh_token"] == lost.json()["refresh_token"]
    assert retried.json()["expires_in"] <= lost.json()["expires_in"]
    # The grant is whole: the pair works and rotates on as usual.
    assert mcp_post(service, retried.json()["access_token"]).status_code != 401
    third = refresh(service, client, retried.json()["refresh_token"])
    assert third.status_code == 200, third.text
    assert mcp_post(service, third.json()["access_token"]).status_code != 401


def test_a_replay_after_the_grace_revokes_the_grant(service: Service, user: User) -> None:
    client, first = tokens_for(service, user)
    second = refresh(service, client, first["refresh_token"]).json()
    service.clock.advance(_grace(service) + 1)
    # The attacker who copied the first refresh token presents it late.
    replay = refresh(service, client, first["refresh_token"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert "access_token" not in replay.text
    # Everything the stolen token led to is dead, for the attacker and the client alike.
    assert is_invalid_token(mcp_post(service, second["access_token"]))
    assert refresh(service, client, second["refresh_token"]).status_code == 400


def test_a_replay_within_the_grace_after_the_new_pair_was_used_revokes_the_grant(
    service: Service, user: User
) -> None:
    client, first = tokens_for(service, user)
    second = refresh(service, client, first["refresh_token"]).json()
    third = refresh(service, client, second["refresh_token"]).json()  # the client moved on
    replay = refresh(service, client, first["refresh_token"])  # still within the grace
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert is_invalid_token(mcp_post(service, third["access_token"]))
    assert refresh(service, client, third["refresh_token"]).status_code == 400


def test_a_retry_by_another_client_is_refused_and_changes_nothing(
    service: Service, user: User
) -> None:
    client, first = tokens_for(service, user)
    service.clock.advance(30)  # the next authenticator code, for the second sign-in
    other, _ = tokens_for(service, user)
    second = refresh(service, client, first["refresh_token"]).json()
    stolen = refresh(service, other, first["refresh_token"])
    assert stolen.status_code == 400 and "access_token" not in stolen.text
    assert mcp_post(service, second["access_token"]).status_code != 401


def test_only_hashes_of_the_tokens_are_stored(service: Service, user: User) -> None:
    client, first = tokens_for(service, user)
    second = refresh(service, client, first["refresh_token"]).json()
    refresh(service, client, first["refresh_token"])  # a retry
    with service.runtime.db.read() as conn:
        rows = conn.execute(sa.select(oauth_tokens)).all()
    stored = repr(rows)
    for token in (first, second):
        for kind in ("access_token", "refresh_token"):
            assert token[kind] not in stored
            assert token[kind].encode() not in b"".join(
                bytes(row.successor_key or b"") for row in rows
            )
