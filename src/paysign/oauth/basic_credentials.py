"""HTTP Basic client credentials at the token and revocation endpoints (RFC 6749 §2.3.1).

A confidential client registered with ``client_secret_basic`` sends its id and secret in the
``Authorization`` header only; the JavaScript MCP SDK (and so the Inspector) does exactly that.
The Python SDK's ``ClientAuthenticator`` looks for ``client_id`` in the form alone, and its
revocation request requires ``client_secret`` there, so such a client was refused ("Missing
client_id"). This wrapper copies the header's credentials into the form where the form has
none; the SDK's authenticator then checks them as it checks any, so nothing is trusted that it
does not check.

    >>> header = "Basic " + base64.b64encode(b"client%2D1:s3%3Acret").decode()
    >>> with_basic_credentials(b"grant_type=refresh_token&refresh_token=x", header)
    b'grant_type=refresh_token&refresh_token=x&client_id=client-1&client_secret=s3%3Acret'
    >>> with_basic_credentials(b"client_id=a&grant_type=x", header)  # the form's own id stays
    b'client_id=a&grant_type=x&client_secret=s3%3Acret'
    >>> with_basic_credentials(b"grant_type=x", "Bearer t")  # no Basic credentials: untouched
    b'grant_type=x'
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import parse_qs, quote, unquote

from starlette.types import ASGIApp, Receive, Scope, Send

from paysign.http.asgi_body import read_body, replaying

#: A token or revocation request is a few hundred bytes; a longer one is passed on unread
#: past this, and the endpoint answers it as it would have.
_MAX_FORM_BYTES = 64 * 1024


def basic_credentials(authorization: str) -> tuple[str, str] | None:
    """The client id and secret of ``Basic`` credentials (each form-urlencoded, RFC 6749
    §2.3.1), or ``None``."""
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, colon, secret = decoded.partition(":")
    return (unquote(client_id), unquote(secret)) if colon and client_id else None


def with_basic_credentials(body: bytes, authorization: str) -> bytes:
    """``body`` (a form) with the Basic credentials' id and secret added where it has none."""
    credentials = basic_credentials(authorization)
    if credentials is None:
        return body
    form = parse_qs(body.decode("latin-1"))
    added = [
        f"{name}={quote(value, safe='')}".encode()
        for name, value in zip(("client_id", "client_secret"), credentials, strict=True)
        if not form.get(name)
    ]
    return b"&".join([body, *added] if body else added)


class BasicCredentials:
    """Wraps an SDK endpoint that authenticates clients (token, revocation)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", []))
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        if scope["type"] != "http" or scope["method"] != "POST" or not authorization:
            await self.app(scope, receive, send)
            return
        body, more = await read_body(receive, _MAX_FORM_BYTES)
        if not more:
            body = with_basic_credentials(body, authorization)
        await self.app(scope, replaying(body, more, receive), send)
