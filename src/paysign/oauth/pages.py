"""The sign-in and consent pages: plain server-rendered HTML forms, each with a CSRF token.

Thin: parse the form, call one ``AuthorizationService`` use case, render or redirect. Signing
in sets a cookie that binds the request to this browser: the transaction id travels in links
(whoever started the request knows it), the cookie does not, and the consent page and its
decision need both.
"""

from __future__ import annotations

import hashlib
from html import escape
from urllib.parse import urlsplit

from mcp.server.auth.provider import construct_redirect_uri
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from paysign.services.oauth_grants import AuthorizationService, PendingRequest
from paysign.services.oauth_refusals import (
    RATE_LIMITED,
    NotThisBrowser,
    OAuthRefused,
    SignInFailed,
)

_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:26rem;margin:3rem auto;padding:0 1rem;"
    "color:#222}label{display:block;margin:.8rem 0 .2rem}input{width:100%;padding:.4rem;"
    "box-sizing:border-box}button{margin:1rem .5rem 0 0;padding:.5rem 1rem}"
    ".error{color:#a00;border:1px solid #a00;padding:.5rem}.host{font-family:monospace}"
)
_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self' https:; frame-ancestors 'none'",
}


# The sign-in form, the largest, is a few hundred bytes; a form is read whole into memory.
MAX_FORM_BYTES = 16 * 1024


def _too_large(request: Request) -> bool:
    """A browser's form always comes with its length: anything longer than a form, or sent
    without a length (chunked), is refused before a byte of it is read."""
    length = request.headers.get("content-length", "")
    return not (length.isascii() and length.isdigit()) or int(length) > MAX_FORM_BYTES


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)} · paysign</title><style>{_CSS}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=_HEADERS)


def _error(message: str, status: int) -> HTMLResponse:
    return _page("Sign-in unavailable", f'<p class="error">{escape(message)}</p>', status)


def _client_name(service: AuthorizationService, pending: PendingRequest) -> str:
    client = service.client(pending.client_id) or {}
    return str(client.get("client_name") or "An application")


def _refused(refused: OAuthRefused) -> HTMLResponse:
    return _error(refused.description, 403 if isinstance(refused, NotThisBrowser) else 400)


class ConsentCookie:
    """The cookie binding a request to the browser that signed in: HttpOnly, SameSite=Lax,
    scoped to the authorization server's path, Secure (and ``__Secure-``) under an https
    issuer, living no longer than the request. One per request, so two sign-ins in one
    browser (two assistants connecting at once) do not undo each other."""

    def __init__(self, issuer: str, max_age: int) -> None:
        parts = urlsplit(issuer)
        self.secure = parts.scheme == "https"
        self.path = parts.path.rstrip("/") or "/"
        self.max_age = max_age
        self.prefix = "__Secure-paysign_consent_" if self.secure else "paysign_consent_"

    def name(self, txn: str) -> str:
        return self.prefix + hashlib.sha256(b"consent-cookie:" + txn.encode()).hexdigest()[:16]

    def read(self, request: Request, txn: str) -> str | None:
        return request.cookies.get(self.name(txn))

    def set(self, response: Response, txn: str, value: str) -> None:
        response.set_cookie(
            self.name(txn),
            value,
            max_age=self.max_age,
            path=self.path,
            secure=self.secure,
            httponly=True,
            samesite="lax",
        )

    def forget(self, response: Response, txn: str) -> None:
        response.delete_cookie(
            self.name(txn), path=self.path, secure=self.secure, httponly=True, samesite="lax"
        )


class SignInPages:
    def __init__(self, service: AuthorizationService, login_url: str, consent_url: str) -> None:
        self.service = service
        self.login_path = urlsplit(login_url).path
        self.consent_path = urlsplit(consent_url).path
        self.cookie = ConsentCookie(service.config.issuer, service.config.request_ttl)

    def _login_form(self, txn: str, pending: PendingRequest, name: str, message: str = "") -> str:
        error = f'<p class="error" role="alert">{escape(message)}</p>' if message else ""
        return (
            f"<p><strong>{escape(name)}</strong> wants to use your paysign wallet. "
            "Sign in to continue.</p>"
            f'{error}<form method="post" action="{escape(self.login_path)}">'
            f'<input type="hidden" name="txn" value="{escape(txn)}">'
            f'<input type="hidden" name="csrf" value="{escape(pending.csrf)}">'
            '<label for="email">Email</label>'
            '<input id="email" name="email" type="email" autocomplete="username" required>'
            '<label for="password">Password</label><input id="password" name="password" '
            'type="password" autocomplete="current-password" required>'
            '<label for="totp">Authenticator code</label><input id="totp" name="totp" '
            'inputmode="numeric" autocomplete="one-time-code" pattern="[0-9 ]{6,7}" required>'
            '<button type="submit">Sign in</button></form>'
        )

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            txn = request.query_params.get("txn", "")
            try:
                pending = await run_in_threadpool(self.service.pending, txn)
                name = await run_in_threadpool(_client_name, self.service, pending)
            except OAuthRefused as refused:
                return _error(refused.description, 400)
            if pending.signed_in:  # its form's token now guards the consent form
                return RedirectResponse(f"{self.consent_path}?txn={txn}", status_code=303)
            return _page("Sign in to paysign", self._login_form(txn, pending, name))
        if _too_large(request):
            return _error("This form is too large.", 413)
        form = await request.form()
        txn, csrf = str(form.get("txn", "")), str(form.get("csrf", ""))
        address = request.client.host if request.client else "unknown"
        try:
            browser = await run_in_threadpool(
                self.service.sign_in,
                txn,
                csrf,
                str(form.get("email", "")),
                str(form.get("password", "")),
                str(form.get("totp", "")),
                address,
            )
        except SignInFailed as failed:
            try:
                pending = await run_in_threadpool(self.service.pending, txn)
                name = await run_in_threadpool(_client_name, self.service, pending)
            except OAuthRefused as refused:
                return _error(refused.description, 400)
            limited = failed.description.startswith(RATE_LIMITED.split("{")[0])
            body = self._login_form(txn, pending, name, failed.description)
            return _page("Sign in to paysign", body, 429 if limited else 401)
        except OAuthRefused as refused:
            return _error(refused.description, 400)
        response = RedirectResponse(f"{self.consent_path}?txn={txn}", status_code=303)
        self.cookie.set(response, txn, browser)
        return response

    async def consent(self, request: Request) -> Response:
        if request.method == "GET":
            txn = request.query_params.get("txn", "")
            browser = self.cookie.read(request, txn)
            try:
                pending = await run_in_threadpool(
                    lambda: self.service.pending(txn, browser, consent=True)
                )
            except OAuthRefused as refused:
                return _refused(refused)
            if not pending.signed_in:
                return RedirectResponse(f"{self.login_path}?txn={txn}", status_code=303)
            name = await run_in_threadpool(_client_name, self.service, pending)
            host = _destination(pending.params["redirect_uri"])
            body = (
                f"<p><strong>{escape(name)}</strong> asks to use your paysign connector: list "
                "its tools and call them for you, within your source policy and spend caps.</p>"
                f'<p>After you decide, you are sent to <span class="host">{escape(host)}</span>. '
                "Approve only if you recognise this address.</p>"
                f'<form method="post" action="{escape(self.consent_path)}">'
                f'<input type="hidden" name="txn" value="{escape(txn)}">'
                f'<input type="hidden" name="csrf" value="{escape(pending.csrf)}">'
                '<button type="submit" name="decision" value="approve">Approve</button>'
                '<button type="submit" name="decision" value="deny">Deny</button></form>'
            )
            return _page("Allow access?", body)
        if _too_large(request):
            return _error("This form is too large.", 413)
        form = await request.form()
        approve = form.get("decision") == "approve"
        txn, csrf = str(form.get("txn", "")), str(form.get("csrf", ""))
        browser = self.cookie.read(request, txn)
        try:
            pending, code = await run_in_threadpool(
                lambda: self.service.decide(txn, csrf, browser, approve=approve)
            )
        except OAuthRefused as refused:
            return _refused(refused)
        params = pending.params
        issuer = self.service.config.issuer
        if code is None:
            target = construct_redirect_uri(
                params["redirect_uri"], error="access_denied", state=params["state"], iss=issuer
            )
        else:
            target = construct_redirect_uri(
                params["redirect_uri"], code=code, state=params["state"], iss=issuer
            )
        response = RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})
        self.cookie.forget(response, txn)
        return response


def _destination(redirect_uri: str) -> str:
    """Where the browser goes: the host (and a port other than 443), nothing before an '@'.

    >>> _destination("https://claude.ai@evil.example/cb"), _destination("https://[::2]:8443/")
    ('evil.example', '[::2]:8443')
    """
    parts = urlsplit(redirect_uri)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{host}:{port}" if port not in (None, 443) else host
