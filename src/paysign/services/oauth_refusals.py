"""What the authorization server refuses, and the words it tells the caller: the errors the
OAuth use cases (``oauth_grants``, ``oauth_clients``) raise for the entry points to render."""

from __future__ import annotations

from typing import Literal

from paysign.services import sign_in

SIGN_IN_FAILED = sign_in.SIGN_IN_FAILED
RATE_LIMITED = sign_in.RATE_LIMITED
NOT_THIS_BROWSER = (
    "This approval page only works in the same browser you signed in with. Open the link your "
    "application gave you in that browser, or go back to your application and connect again."
)
LINK_USED = (
    "This sign-in link has expired or was already used. Go back to your application and "
    "connect again."
)
REQUEST_USED = (
    "This approval form has expired or was already used. Go back to your application and "
    "connect again."
)
FORM_EXPIRED = "This form has expired. Reload the page and try again."
TOO_MANY = "Too many client registrations from your network. Try again in {seconds} seconds."
TOO_MANY_AUTHORIZATIONS = (
    "Too many sign-in requests from your network. Try again in {seconds} seconds."
)


class OAuthRefused(Exception):
    """A request the authorization server refuses; ``description`` is shown to the caller."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class RequestExpired(OAuthRefused):
    pass


class SignInFailed(OAuthRefused):
    pass


class NotThisBrowser(OAuthRefused):
    """The request was signed in to from another browser (or the cookie is gone)."""


class ClientRefused(OAuthRefused):
    """Metadata the server will not store; ``error`` is the RFC 7591 error code."""

    error: Literal["invalid_client_metadata", "invalid_redirect_uri"] = "invalid_client_metadata"


class RedirectRefused(ClientRefused):
    error = "invalid_redirect_uri"


class TooManyRegistrations(OAuthRefused):
    def __init__(self, retry_after: int) -> None:
        super().__init__(TOO_MANY.format(seconds=retry_after))
        self.retry_after = retry_after


class TooManyAuthorizations(OAuthRefused):
    def __init__(self, retry_after: int) -> None:
        super().__init__(TOO_MANY_AUTHORIZATIONS.format(seconds=retry_after))
        self.retry_after = retry_after
