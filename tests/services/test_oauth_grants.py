"""The OAuth use cases called directly, without HTTP: consent only from the browser that signed
in, single-use codes and refresh tokens whose replay revokes what they led to, secrets stored
only as hashes, and registration access tokens checked."""

from __future__ import annotations

from dataclasses import dataclass

import pyotp
import pytest

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.services import accounts
from paysign.services.oauth_clients import Registrations, check_metadata
from paysign.services.oauth_grants import (
    AuthorizationService,
    CodeGrant,
    IssuedTokens,
    OAuthConfig,
)
from paysign.services.oauth_refusals import (
    LINK_USED,
    NotThisBrowser,
    RedirectRefused,
    RequestExpired,
    SignInFailed,
)
from paysign.store.schema import oauth_codes, oauth_requests, oauth_tokens

PASSWORD = "correct horse battery"
REDIRECT = "https://client.example/oauth/callback"
CLIENT_ID = "test-client"
ADDRESS = "203.0.113.7"


@dataclass
class Signer:
    email: str
    totp_secret: str

    def code(self, clock: FrozenClock) -> str:
        return pyotp.TOTP(self.totp_secret).at(clock.now())


@pytest.fixture
def grants(runtime: Runtime) -> AuthorizationService:
    config = OAuthConfig.from_settings(runtime.settings)
    return AuthorizationService(runtime.db, runtime.vault, runtime.clock, config)


@pytest.fixture
def registrations(runtime: Runtime) -> Registrations:
    return Registrations(runtime.db, runtime.clock)


@pytest.fixture
def signer(runtime: Runtime, registrations: Registrations) -> Signer:
    created = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email="ada@example.com", password=PASSWORD
    )
    registrations.register(CLIENT_ID, {"client_name": "Test", "redirect_uris": [REDIRECT]})
    return Signer(created.email, created.totp_secret)


def _signed_in(grants: AuthorizationService, signer: Signer, clock: FrozenClock) -> tuple[str, str]:
    """A started request signed in to; returns its transaction id and the browser's cookie."""
    txn = grants.start(CLIENT_ID, {"redirect_uri": REDIRECT, "state": "s"})
    csrf = grants.pending(txn).csrf
    browser = grants.sign_in(txn, csrf, signer.email, PASSWORD, signer.code(clock), ADDRESS)
    return txn, browser


def _approved(
    grants: AuthorizationService, signer: Signer, clock: FrozenClock
) -> tuple[str, str, str, CodeGrant]:
    """A request signed in to and approved: its transaction id, the browser's cookie, its
    authorization code and the grant the code stands for."""
    txn, browser = _signed_in(grants, signer, clock)
    csrf = grants.pending(txn, browser, consent=True).csrf
    _, code = grants.decide(txn, csrf, browser, approve=True)
    assert code is not None
    grant = grants.load_code(code)
    assert grant is not None
    return txn, browser, code, grant


def _tokens(grants: AuthorizationService, signer: Signer, clock: FrozenClock) -> IssuedTokens:
    _, _, code, grant = _approved(grants, signer, clock)
    issued = grants.exchange_code(code, grant)
    assert issued is not None
    return issued


def test_consent_is_only_for_the_browser_that_signed_in(
    grants: AuthorizationService, signer: Signer, clock: FrozenClock
) -> None:
    txn, browser = _signed_in(grants, signer, clock)
    with pytest.raises(NotThisBrowser):
        grants.pending(txn, "another browser", consent=True)
    with pytest.raises(NotThisBrowser):
        grants.pending(txn, None, consent=True)
    csrf = grants.pending(txn, browser, consent=True).csrf
    with pytest.raises(NotThisBrowser):
        grants.decide(txn, csrf, "another browser", approve=True)
    pending, code = grants.decide(txn, csrf, browser, approve=True)
    assert pending.params["redirect_uri"] == REDIRECT and code is not None
    with pytest.raises(RequestExpired):
        grants.decide(txn, csrf, browser, approve=True)


def test_a_request_is_signed_in_to_once(
    grants: AuthorizationService, signer: Signer, clock: FrozenClock
) -> None:
    txn, _ = _signed_in(grants, signer, clock)
    clock.advance(30)
    with pytest.raises(RequestExpired, match=LINK_USED):
        grants.sign_in(txn, "csrf", signer.email, PASSWORD, signer.code(clock), ADDRESS)


def test_a_wrong_password_is_refused_with_the_shared_message(
    grants: AuthorizationService, signer: Signer, clock: FrozenClock
) -> None:
    txn = grants.start(CLIENT_ID, {"redirect_uri": REDIRECT})
    csrf = grants.pending(txn).csrf
    with pytest.raises(SignInFailed, match="not correct"):
        grants.sign_in(txn, csrf, signer.email, "wrong password", signer.code(clock), ADDRESS)
    assert not grants.pending(txn).signed_in


def test_a_replayed_code_revokes_the_tokens_it_was_exchanged_for(
    runtime: Runtime, grants: AuthorizationService, signer: Signer, clock: FrozenClock
) -> None:
    txn, browser, code, grant = _approved(grants, signer, clock)
    issued = grants.exchange_code(code, grant)
    assert issued is not None
    assert grants.resolve(issued.access_token) is not None
    assert grants.exchange_code(code, grant) is None
    assert grants.resolve(issued.access_token) is None
    with runtime.db.read() as conn:
        stored = [*conn.execute(oauth_codes.select()), *conn.execute(oauth_tokens.select())]
        stored += list(conn.execute(oauth_requests.select()))
    handed_out = {code, txn, browser, issued.access_token, issued.refresh_token}
    assert not any(secret in str(row) for row in stored for secret in handed_out)


def test_a_replayed_refresh_token_revokes_its_family(
    grants: AuthorizationService, signer: Signer, clock: FrozenClock
) -> None:
    first = _tokens(grants, signer, clock)
    grant = grants.load_refresh(first.refresh_token)
    assert grant is not None
    second = grants.rotate(first.refresh_token, grant)
    assert second is not None and grants.resolve(second.access_token) is not None
    clock.advance(grants.config.refresh_grace + 1)  # no longer a retry of a lost answer
    assert grants.load_refresh(first.refresh_token) is None
    assert grants.load_refresh(second.refresh_token) is None
    assert grants.resolve(second.access_token) is None


def test_a_refresh_retried_within_the_grace_gets_the_same_pair(
    grants: AuthorizationService, signer: Signer, clock: FrozenClock
) -> None:
    first = _tokens(grants, signer, clock)
    grant = grants.load_refresh(first.refresh_token)
    assert grant is not None
    second = grants.rotate(first.refresh_token, grant)
    assert second is not None
    clock.advance(grants.config.refresh_grace)
    again = grants.load_refresh(first.refresh_token)
    assert again is not None
    retried = grants.rotate(first.refresh_token, again)
    assert retried is not None
    assert (retried.access_token, retried.refresh_token) == (
        second.access_token,
        second.refresh_token,
    )
    assert grants.resolve(second.access_token) is not None


def test_revoking_needs_the_client_the_token_was_issued_to(
    grants: AuthorizationService, signer: Signer, clock: FrozenClock
) -> None:
    issued = _tokens(grants, signer, clock)
    grants.revoke(issued.refresh_token, "another-client")
    assert grants.resolve(issued.access_token) is not None
    grants.revoke(issued.refresh_token, CLIENT_ID)
    assert grants.resolve(issued.access_token) is None


def test_a_registration_is_read_only_with_its_token(registrations: Registrations) -> None:
    token = registrations.register("reader", {"client_name": "R", "redirect_uris": [REDIRECT]})
    assert registrations.for_registration_token("reader", "not the token") is None
    found = registrations.for_registration_token("reader", token)
    assert found is not None and found["redirect_uris"] == [REDIRECT]


def test_a_loopback_redirect_is_refused_as_a_redirect() -> None:
    with pytest.raises(RedirectRefused) as refused:
        check_metadata({"redirect_uris": ["https://127.1/cb"]})
    assert refused.value.error == "invalid_redirect_uri"
