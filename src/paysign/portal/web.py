"""What every portal page shares: templates, the session cookie, the CSRF check, amounts in
USDC, and the guard that keeps API keys and tokens out.

Every page needs a session cookie; every form carries the session's CSRF token, and a POST
without the right one changes nothing. A request carrying an ``Authorization`` header (an API
key, an OAuth token) is refused outright: the portal is for the account holder's browser only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from paysign.policy.caps import iso
from paysign.portal.display import grouped, network_name, refusal_reason, when
from paysign.portal.qr import qr_svg
from paysign.protocol.usdc import format_usdc, parse_typed_usdc
from paysign.services.portal_deps import PortalDeps, PortalRuntime, portal_deps
from paysign.services.sessions import Session

PREFIX = "/portal"
HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # Scripts and the stylesheet only from the portal's own files (static/), never inline:
    # injected markup can neither run nor restyle the page (a fake form over a real one).
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
}
MAX_FORM_BYTES = 16 * 1024  # the largest form (a rule) is a few kilobytes
Endpoint = Callable[[Request], Awaitable[Response]]
FORM_EXPIRED = "This form has expired or was not sent from this page. Reload it and try again."
# A notice travels from a POST to the page its redirect shows in a short-lived cookie: the
# redirect may reach another worker, and a notice is not worth a database row.
NOTICE_SECONDS = 60
MAX_NOTICE_CHARS = 600
# The notice the request being answered carries, read by ``no_bearer`` and shown by ``render``.
_carried_notice: ContextVar[str | None] = ContextVar("carried_notice", default=None)
# Which navigation entry each page's template belongs to (``aria-current`` in base.html).
NAV_OF_TEMPLATE = {
    "home.html": "overview",
    "connect.html": "connect",
    "keys.html": "keys",
    "approvals.html": "approvals",
    "policy.html": "policy",
    "activity.html": "activity",
    "settings.html": "settings",
    "authenticator.html": "settings",
    "notifications.html": "settings",
    "withdraw.html": "overview",
    "withdraw_confirm.html": "overview",
}


def _is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cookie_policy(base_url: str) -> tuple[str, bool]:
    """The session cookie's name and whether it is ``Secure``: ``__Host-`` and Secure unless the
    portal is served over plain http on a loopback address (where browsers drop Secure cookies).

    >>> cookie_policy("https://paysign.example")
    ('__Host-paysign_session', True)
    >>> cookie_policy("http://127.0.0.1:8402")
    ('paysign_session', False)
    """
    parts = urlsplit(base_url)
    if parts.scheme == "http" and _is_loopback(parts.hostname or ""):
        return "paysign_session", False
    return "__Host-paysign_session", True


def usdc_text(base_units: int | None) -> str:
    """Base units as USDC for a form field; ``None`` (no cap) as empty.

    >>> usdc_text(1_500_000), usdc_text(10_000_000), usdc_text(1), usdc_text(None)
    ('1.5', '10', '0.000001', '')
    """
    return "" if base_units is None else format_usdc(base_units)


def parse_usdc(text: str) -> int | None:
    """A USDC amount typed in a form as base units; empty means no cap.

    >>> parse_usdc("1.5"), parse_usdc(" 10 "), parse_usdc("1,000"), parse_usdc("")
    (1500000, 10000000, 1000000000, None)
    >>> parse_usdc("0.0000001")
    Traceback (most recent call last):
    ValueError: '0.0000001' is not a USDC amount (at most 6 decimals, not negative)
    """
    text = text.strip()
    if not text:
        return None
    units = parse_typed_usdc(text)
    # Caps are stored in a signed 64-bit column.
    if units >= 2**63:
        raise ValueError(f"{text!r} is too large")
    return units


def _templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(Path(__file__).with_name("templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        auto_reload=False,
    )
    env.filters["usdc"] = usdc_text
    env.filters["qr_svg"] = qr_svg
    env.filters["iso"] = lambda value: iso(int(value)) if value is not None else ""
    env.filters["when"] = when
    env.filters["network_name"] = network_name
    env.filters["grouped"] = grouped
    env.filters["refusal_reason"] = refusal_reason
    return env


class Portal:
    """What every page shares: the use cases' dependencies, templates, the session cookie and its
    CSRF check."""

    def __init__(self, runtime: PortalRuntime) -> None:
        self.deps: PortalDeps = portal_deps(runtime)
        self.cookie_name, self.secure = cookie_policy(runtime.settings.resolved_base_url)
        self.notice_cookie = self.cookie_name.replace("session", "notice")
        self.env = _templates()

    def render(
        self,
        template: str,
        session: Session | None,
        *,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        if context.get("notice") is None and status < 300:
            context["notice"] = _carried_notice.get()
        html = self.env.get_template(template).render(
            base=PREFIX,
            csrf=session.csrf if session else "",
            signed_in=bool(session and session.account_id),
            current=NAV_OF_TEMPLATE.get(template),
            **context,
        )
        response = HTMLResponse(html, status_code=status, headers=HEADERS)
        if session is not None:
            self.set_cookie(response, session)
        return response

    def set_cookie(self, response: Response, session: Session) -> None:
        response.set_cookie(
            self.cookie_name,
            session.id,
            path="/",
            secure=self.secure,
            httponly=True,
            samesite="lax",
        )

    def after_post(self, path: str, notice: str | None = None) -> Response:
        """Post/Redirect/Get: a form that changed something answers with a redirect to the page
        showing the result, so reloading that page does not send the form again."""
        response = RedirectResponse(f"{PREFIX}{path}", status_code=303, headers=HEADERS)
        if notice:
            response.set_cookie(
                self.notice_cookie,
                quote(notice[:MAX_NOTICE_CHARS]),
                max_age=NOTICE_SECONDS,
                path="/",
                secure=self.secure,
                httponly=True,
                samesite="lax",
            )
        return response

    def refused(self, message: str, status: int) -> HTMLResponse:
        return self.render("message.html", None, status=status, title="Refused", error=message)

    async def session_of(self, request: Request) -> Session | None:
        return await run_in_threadpool(
            self.deps.sessions.load, request.cookies.get(self.cookie_name)
        )

    async def form_session(self, request: Request) -> tuple[Session | None, dict[str, str]]:
        """The session of a POST whose CSRF token matches, with its form; ``None`` otherwise."""
        form = await request.form()
        fields = {key: str(value) for key, value in form.items() if isinstance(value, str)}
        session = await self.session_of(request)
        if session is None or not session.csrf_ok(fields.get("csrf", "")):
            return None, fields
        return session, fields

    def to_sign_in(self) -> Response:
        return RedirectResponse(f"{PREFIX}/sign-in", status_code=303, headers=HEADERS)


def static_file(name: str, media_type: str) -> Endpoint:
    """One of the portal's own files (``static/<name>``: its script, its stylesheet), read once:
    a fixed file per route, so no request path ever reaches the file system."""
    body = (Path(__file__).with_name("static") / name).read_bytes()
    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}

    async def serve(request: Request) -> Response:
        return Response(body, media_type=media_type, headers=headers)

    return serve


def no_bearer(portal: Portal, endpoint: Endpoint) -> Endpoint:
    """Refuse any portal request that carries an ``Authorization`` header: an API key (or any
    token) never reaches a portal page or action, whatever cookie comes with it. A page shown
    after a form's redirect also gets the form's notice here, once."""

    async def guarded(request: Request) -> Response:
        refusal = _refusal(request)
        if refusal is not None:
            return refusal
        carried = request.cookies.get(portal.notice_cookie) if request.method == "GET" else None
        if not carried:
            return await endpoint(request)
        token = _carried_notice.set(unquote(carried)[:MAX_NOTICE_CHARS])
        try:
            response = await endpoint(request)
        finally:
            _carried_notice.reset(token)
        response.delete_cookie(
            portal.notice_cookie, path="/", secure=portal.secure, httponly=True, samesite="lax"
        )
        return response

    return guarded


def _refusal(request: Request) -> Response | None:
    """The answer to a request no portal endpoint may see, or ``None``."""
    if "authorization" in request.headers:
        return HTMLResponse(
            "<!doctype html><title>Refused · paysign</title><p>The portal is for your "
            "browser session; API keys and tokens are not accepted here.</p>",
            status_code=403,
            headers=HEADERS,
        )
    # A form always comes with its length (browsers send one): no unbounded chunked body.
    bodiless = "0" if request.method in ("GET", "HEAD") else ""
    length = request.headers.get("content-length", bodiless)
    if not length.isdigit() or int(length) > MAX_FORM_BYTES:
        return HTMLResponse(
            "<!doctype html><title>Refused · paysign</title><p>This form is too large.</p>",
            status_code=413,
            headers=HEADERS,
        )
    return None
