"""The sign-in and consent pages: plain server-rendered HTML forms, each with a CSRF token.

Thin: parse the form, call one ``AuthorizationService`` use case, render or redirect.
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from mcp.server.auth.provider import construct_redirect_uri
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from paysign.oauth.service import (
    RATE_LIMITED,
    AuthorizationService,
    OAuthRefused,
    PendingRequest,
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
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self' https:; frame-ancestors 'none'",
}


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


class SignInPages:
    def __init__(self, service: AuthorizationService, login_url: str, consent_url: str) -> None:
        self.service = service
        self.login_path = urlsplit(login_url).path
        self.consent_path = urlsplit(consent_url).path

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
            return _page("Sign in to paysign", self._login_form(txn, pending, name))
        form = await request.form()
        txn, csrf = str(form.get("txn", "")), str(form.get("csrf", ""))
        address = request.client.host if request.client else "unknown"
        try:
            await run_in_threadpool(
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
        return RedirectResponse(f"{self.consent_path}?txn={txn}", status_code=303)

    async def consent(self, request: Request) -> Response:
        if request.method == "GET":
            txn = request.query_params.get("txn", "")
            try:
                pending = await run_in_threadpool(self.service.pending, txn)
            except OAuthRefused as refused:
                return _error(refused.description, 400)
            if not pending.signed_in:
                return RedirectResponse(f"{self.login_path}?txn={txn}", status_code=303)
            name = await run_in_threadpool(_client_name, self.service, pending)
            host = urlsplit(pending.params["redirect_uri"]).netloc
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
        form = await request.form()
        approve = form.get("decision") == "approve"
        try:
            pending, code = await run_in_threadpool(
                lambda: self.service.decide(
                    str(form.get("txn", "")), str(form.get("csrf", "")), approve=approve
                )
            )
        except OAuthRefused as refused:
            return _error(refused.description, 400)
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
        return RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})
