"""The portal's HTTP surface, mounted at ``/portal``: thin handlers that read the session and
the form, call one ``PortalService`` use case, and render a template.

Every page needs a session cookie; every form carries the session's CSRF token, and a POST
without the right one changes nothing. A request carrying an ``Authorization`` header (an API
key, an OAuth token) is refused outright: the portal is for the account holder's browser only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from paysign.bootstrap import Runtime
from paysign.errors import (
    AccountAlreadyExists,
    ActiveKeyExists,
    InvalidAccountInput,
    InvalidKeyExpiry,
    InvalidPolicy,
    NoActiveKey,
)
from paysign.policy.caps import USDC, iso
from paysign.policy.rules import parse_rule
from paysign.portal.service import PolicyEdits, PortalService, active_key
from paysign.portal.sessions import Session
from paysign.services.accounts import MIN_PASSWORD_LENGTH
from paysign.services.keys import MAX_EXPIRY_DAYS
from paysign.services.sign_in import CredentialsRefused

PREFIX = "/portal"
_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
}
MAX_FORM_BYTES = 16 * 1024  # the largest form (a rule) is a few kilobytes
Endpoint = Callable[[Request], Awaitable[Response]]
FORM_EXPIRED = "This form has expired or was not sent from this page. Reload it and try again."


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
    if base_units is None:
        return ""
    text = f"{Decimal(base_units) / USDC:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def parse_usdc(text: str) -> int | None:
    """A USDC amount typed in a form as base units; empty means no cap.

    >>> parse_usdc("1.5"), parse_usdc(" 10 "), parse_usdc("")
    (1500000, 10000000, None)
    >>> parse_usdc("0.0000001")
    Traceback (most recent call last):
    ValueError: '0.0000001' is not a USDC amount (at most 6 decimals)
    """
    text = text.strip().replace(",", "")
    if not text:
        return None
    try:
        amount = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a USDC amount") from None
    units = amount * USDC
    if not amount.is_finite() or amount < 0 or units != units.to_integral_value():
        raise ValueError(f"{text!r} is not a USDC amount (at most 6 decimals)")
    if units >= 2**63:
        raise ValueError(f"{text!r} is too large")
    return int(units)


def _templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(Path(__file__).with_name("templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        auto_reload=False,
    )
    env.filters["usdc"] = usdc_text
    env.filters["iso"] = lambda value: iso(int(value)) if value is not None else ""
    return env


class Portal:
    def __init__(self, runtime: Runtime) -> None:
        self.service = PortalService(runtime)
        self.policy = PolicyEdits(self.service)
        self.cookie_name, self.secure = cookie_policy(runtime.settings.resolved_base_url)
        self.env = _templates()

    # ---- plumbing ----

    def render(
        self,
        template: str,
        session: Session | None,
        *,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        html = self.env.get_template(template).render(
            base=PREFIX,
            csrf=session.csrf if session else "",
            signed_in=bool(session and session.account_id),
            **context,
        )
        response = HTMLResponse(html, status_code=status, headers=_HEADERS)
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

    def refused(self, message: str, status: int) -> HTMLResponse:
        return self.render("message.html", None, status=status, title="Refused", error=message)

    async def session_of(self, request: Request) -> Session | None:
        return await run_in_threadpool(
            self.service.sessions.load, request.cookies.get(self.cookie_name)
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
        return RedirectResponse(f"{PREFIX}/sign-in", status_code=303, headers=_HEADERS)

    # ---- signing in and out ----

    async def sign_in(self, request: Request) -> Response:
        if request.method == "GET":
            session = await self.session_of(request)
            if session is not None and session.account_id:
                return RedirectResponse(f"{PREFIX}/", status_code=303, headers=_HEADERS)
            if session is None:
                session = await run_in_threadpool(self.service.sessions.start_anonymous)
            return self.render("sign_in.html", session, title="Sign in to paysign")
        session, form = await self.form_session(request)
        if session is None:
            fresh = await run_in_threadpool(self.service.sessions.start_anonymous)
            return self.render(
                "sign_in.html", fresh, status=403, title="Sign in to paysign", error=FORM_EXPIRED
            )
        address = request.client.host if request.client else "unknown"
        try:
            signed_in = await run_in_threadpool(
                self.service.sign_in,
                session,
                form.get("email", ""),
                form.get("password", ""),
                form.get("totp", ""),
                address,
            )
        except CredentialsRefused as refused:
            return self.render(
                "sign_in.html",
                session,
                status=429 if refused.rate_limited else 401,
                title="Sign in to paysign",
                error=refused.message,
                email=form.get("email", "")[:320],
            )
        response = RedirectResponse(f"{PREFIX}/", status_code=303, headers=_HEADERS)
        self.set_cookie(response, signed_in)
        return response

    async def sign_up(self, request: Request) -> Response:
        title = "Create a paysign account"
        if request.method == "GET":
            session = await self.session_of(request)
            if session is None:
                session = await run_in_threadpool(self.service.sessions.start_anonymous)
            return self.render(
                "sign_up.html", session, title=title, min_password=MIN_PASSWORD_LENGTH
            )
        session, form = await self.form_session(request)
        if session is None:
            fresh = await run_in_threadpool(self.service.sessions.start_anonymous)
            return self.render(
                "sign_up.html",
                fresh,
                status=403,
                title=title,
                error=FORM_EXPIRED,
                min_password=MIN_PASSWORD_LENGTH,
            )
        try:
            created, uri = await run_in_threadpool(
                self.service.sign_up, form.get("email", ""), form.get("password", "")
            )
        except (InvalidAccountInput, AccountAlreadyExists) as problem:
            return self.render(
                "sign_up.html",
                session,
                status=400,
                title=title,
                error=problem.detail,
                email=form.get("email", "")[:320],
                min_password=MIN_PASSWORD_LENGTH,
            )
        return self.render(
            "enrol.html",
            session,
            title="Set up your authenticator",
            secret=created.totp_secret,
            uri=uri,
            email=created.email,
            wallet=created.wallet_address,
        )

    async def sign_out(self, request: Request) -> Response:
        session, _ = await self.form_session(request)
        if session is None:
            return self.refused(FORM_EXPIRED, 403)
        await run_in_threadpool(self.service.sessions.end, session)
        response = RedirectResponse(f"{PREFIX}/sign-in", status_code=303, headers=_HEADERS)
        response.delete_cookie(
            self.cookie_name, path="/", secure=self.secure, httponly=True, samesite="lax"
        )
        return response

    # ---- signed-in pages ----

    async def home(self, request: Request) -> Response:
        session = await self.session_of(request)
        if session is None or session.account_id is None:
            return self.to_sign_in()
        overview = await run_in_threadpool(self.service.overview, session.account_id)
        active = active_key(overview.keys, self.service.clock.now())
        return self.render("home.html", session, title="Overview", overview=overview, active=active)

    async def activity(self, request: Request) -> Response:
        session = await self.session_of(request)
        if session is None or session.account_id is None:
            return self.to_sign_in()
        entries = await run_in_threadpool(self.service.activity, session.account_id)
        return self.render("activity.html", session, title="Activity", entries=entries)

    async def settings(self, request: Request) -> Response:
        session = await self.session_of(request)
        if session is None or session.account_id is None:
            return self.to_sign_in()
        return self._settings_page(session)

    def _settings_page(self, session: Session, *, status: int = 200, **context: Any) -> Response:
        return self.render(
            "settings.html",
            session,
            status=status,
            title="Settings",
            min_password=MIN_PASSWORD_LENGTH,
            **context,
        )

    async def change_password(self, request: Request) -> Response:
        session, form = await self.form_session(request)
        if session is None or session.account_id is None:
            return self.refused(FORM_EXPIRED, 403)
        try:
            ended = await run_in_threadpool(
                self.service.change_password,
                session,
                form.get("current", ""),
                form.get("new", ""),
                form.get("totp", ""),
            )
        except InvalidAccountInput as problem:
            return self._settings_page(session, status=400, error=problem.detail)
        except CredentialsRefused as refused:
            status = 429 if refused.rate_limited else 401
            return self._settings_page(session, status=status, error=refused.message)
        return self._settings_page(
            session, notice=f"Password changed. {ended} other session(s) signed out."
        )

    async def reset_authenticator(self, request: Request) -> Response:
        session, form = await self.form_session(request)
        if session is None or session.account_id is None:
            return self.refused(FORM_EXPIRED, 403)
        try:
            secret, uri, token = await run_in_threadpool(
                self.service.start_authenticator_reset,
                session,
                form.get("current", ""),
                form.get("totp", ""),
            )
        except CredentialsRefused as refused:
            status = 429 if refused.rate_limited else 401
            return self._settings_page(session, status=status, error=refused.message)
        return self.render(
            "authenticator.html",
            session,
            title="Set up the new authenticator",
            secret=secret,
            uri=uri,
            token=token,
        )

    async def confirm_authenticator(self, request: Request) -> Response:
        session, form = await self.form_session(request)
        if session is None or session.account_id is None:
            return self.refused(FORM_EXPIRED, 403)
        try:
            ended = await run_in_threadpool(
                self.service.confirm_authenticator_reset,
                session,
                form.get("token", ""),
                form.get("totp", ""),
            )
        except CredentialsRefused as refused:
            return self._settings_page(session, status=400, error=refused.message)
        return self._settings_page(
            session,
            notice=f"The new authenticator is in use. {ended} other session(s) signed out.",
        )

    async def end_other_sessions(self, request: Request) -> Response:
        session, _ = await self.form_session(request)
        if session is None or session.account_id is None:
            return self.refused(FORM_EXPIRED, 403)
        ended = await run_in_threadpool(self.service.end_other_sessions, session)
        return self._settings_page(session, notice=f"{ended} other session(s) signed out.")

    async def _keys_page(
        self, session: Session, *, status: int = 200, **context: Any
    ) -> HTMLResponse:
        assert session.account_id is not None
        overview = await run_in_threadpool(self.service.overview, session.account_id)
        active = active_key(overview.keys, self.service.clock.now())
        past = [k for k in overview.keys if k is not active]
        return self.render(
            "keys.html",
            session,
            status=status,
            title="API key",
            active=active,
            past=past,
            max_days=MAX_EXPIRY_DAYS,
            **context,
        )

    async def keys(self, request: Request) -> Response:
        if request.method == "GET":
            session = await self.session_of(request)
            if session is None or session.account_id is None:
                return self.to_sign_in()
            return await self._keys_page(session)
        session, form = await self.form_session(request)
        if session is None or session.account_id is None:
            return self.refused(FORM_EXPIRED, 403)
        try:
            days = int(form.get("days", ""))
        except ValueError:
            return await self._keys_page(
                session, status=400, error=f"Choose an expiry of 1 to {MAX_EXPIRY_DAYS} days."
            )
        try:
            issued = await run_in_threadpool(
                self.service.create_key, session.account_id, form.get("totp", ""), days
            )
        except CredentialsRefused as refused:
            status = 429 if refused.rate_limited else 401
            return await self._keys_page(session, status=status, error=refused.message)
        except (InvalidKeyExpiry, ActiveKeyExists) as problem:
            return await self._keys_page(session, status=400, error=problem.detail)
        return await self._keys_page(session, issued=issued)

    async def revoke_key(self, request: Request) -> Response:
        session, _ = await self.form_session(request)
        if session is None or session.account_id is None:
            return self.refused(FORM_EXPIRED, 403)
        try:
            await run_in_threadpool(self.service.revoke_key, session.account_id)
        except NoActiveKey:
            return await self._keys_page(session, status=400, error="There is no active key.")
        return await self._keys_page(session, notice="The key is revoked; it no longer works.")

    async def _approvals_page(
        self, session: Session, *, status: int = 200, **context: Any
    ) -> HTMLResponse:
        assert session.account_id is not None
        overview = await run_in_threadpool(self.service.overview, session.account_id)
        return self.render(
            "approvals.html",
            session,
            status=status,
            title="Approvals",
            pending=overview.pending,
            **context,
        )

    async def approvals(self, request: Request) -> Response:
        if request.method == "GET":
            session = await self.session_of(request)
            if session is None or session.account_id is None:
                return self.to_sign_in()
            return await self._approvals_page(session)
        session, form = await self.form_session(request)
        if session is None or session.account_id is None:
            return self.refused(FORM_EXPIRED, 403)
        decision = form.get("decision", "")
        seller = form.get("seller", "")
        if decision not in ("allow", "deny"):
            return await self._approvals_page(session, status=400, error="Approve or deny.")
        try:
            await run_in_threadpool(
                self.service.decide,
                session.account_id,
                seller,
                "allow" if decision == "allow" else "deny",
                form.get("totp", ""),
            )
        except InvalidPolicy as problem:
            return await self._approvals_page(session, status=400, error=problem.detail)
        except CredentialsRefused as refused:
            status = 429 if refused.rate_limited else 401
            return await self._approvals_page(session, status=status, error=refused.message)
        done = "approved (allow list)" if decision == "allow" else "denied (deny list)"
        return await self._approvals_page(session, notice=f"{seller}: {done}.")


_APPROVALS = [
    ("all", "Every seller not on the allow list"),
    ("openEcosystem", "Open-ecosystem sellers not on the allow list (catalog sellers need none)"),
    ("none", "None: pay any seller not denied"),
]
_ECOSYSTEMS = [
    ("premium", "Premium catalog sellers"),
    ("standard", "Standard catalog sellers"),
    ("openEcosystem", "Open ecosystem (any other x402 seller)"),
]
_CAPS = [("perPayment", "Per payment"), ("daily", "Per UTC day"), ("monthly", "Per UTC month")]


class PolicyPages:
    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def page(self, session: Session, *, status: int = 200, **context: Any) -> HTMLResponse:
        assert session.account_id is not None
        current = await run_in_threadpool(self.portal.policy.get, session.account_id)
        return self.portal.render(
            "policy.html",
            session,
            status=status,
            title="Source policy",
            policy=current,
            approvals=_APPROVALS,
            ecosystems=_ECOSYSTEMS,
            caps=_CAPS,
            **context,
        )

    async def show(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        return await self.page(session)

    async def _change(
        self, session: Session, edit: Callable[[dict[str, Any]], dict[str, Any]], code: str
    ) -> Response:
        assert session.account_id is not None
        try:
            await run_in_threadpool(self.portal.policy.change, session.account_id, edit, code)
        except InvalidPolicy as problem:
            return await self.page(session, status=400, error=problem.detail)
        except CredentialsRefused as refused:
            message = (
                refused.message
                if code.strip()
                else "This change lets your agent do more: enter a fresh authenticator code."
            )
            return await self.page(
                session, status=429 if refused.rate_limited else 401, error=message
            )
        return await self.page(session, notice="Policy saved.")

    async def settings(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        try:
            caps = {name: parse_usdc(form.get(name, "")) for name, _ in _CAPS}
        except ValueError as exc:
            return await self.page(session, status=400, error=str(exc))
        approval = form.get("approval", "")

        def edit(doc: dict[str, Any]) -> dict[str, Any]:
            doc["approval"] = approval
            doc["ecosystems"] = {name: form.get(name) == "on" for name, _ in _ECOSYSTEMS}
            doc["caps"] = caps
            return doc

        return await self._change(session, edit, form.get("totp", ""))

    async def rules(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        kind, action = form.get("kind", ""), form.get("action", "")
        text = form.get("rule", "").strip()
        if kind not in ("allow", "deny") or action not in ("add", "remove") or not text:
            return await self.page(session, status=400, error="Choose a rule and a list.")
        other = "deny" if kind == "allow" else "allow"

        def edit(doc: dict[str, Any]) -> dict[str, Any]:
            if action == "remove":
                doc[kind] = [rule for rule in doc[kind] if rule != text]
            else:
                try:
                    rule = str(parse_rule(text))
                except ValueError as exc:
                    raise InvalidPolicy("/rule", str(exc)) from None
                # A rule moves between lists: adding it to one takes it off the other.
                doc[other] = [existing for existing in doc[other] if existing != rule]
                if rule not in doc[kind]:
                    doc[kind].append(rule)
            return doc

        return await self._change(session, edit, form.get("totp", ""))


def _no_bearer(endpoint: Endpoint) -> Endpoint:
    """Refuse any portal request that carries an ``Authorization`` header: an API key (or any
    token) never reaches a portal page or action, whatever cookie comes with it."""

    async def guarded(request: Request) -> Response:
        if "authorization" in request.headers:
            return HTMLResponse(
                "<!doctype html><title>Refused · paysign</title><p>The portal is for your "
                "browser session; API keys and tokens are not accepted here.</p>",
                status_code=403,
                headers=_HEADERS,
            )
        # A form always comes with its length (browsers send one): no unbounded chunked body.
        bodiless = "0" if request.method in ("GET", "HEAD") else ""
        length = request.headers.get("content-length", bodiless)
        if not length.isdigit() or int(length) > MAX_FORM_BYTES:
            return HTMLResponse(
                "<!doctype html><title>Refused · paysign</title><p>This form is too large.</p>",
                status_code=413,
                headers=_HEADERS,
            )
        return await endpoint(request)

    return guarded


def create_portal(runtime: Runtime) -> list[BaseRoute]:
    """The portal's routes, with their full paths under ``/portal``."""
    portal = Portal(runtime)
    policy_pages = PolicyPages(portal)
    pages: list[tuple[str, Endpoint, list[str]]] = [
        ("/", portal.home, ["GET"]),
        ("/sign-in", portal.sign_in, ["GET", "POST"]),
        ("/sign-up", portal.sign_up, ["GET", "POST"]),
        ("/sign-out", portal.sign_out, ["POST"]),
        ("/keys", portal.keys, ["GET", "POST"]),
        ("/keys/revoke", portal.revoke_key, ["POST"]),
        ("/approvals", portal.approvals, ["GET", "POST"]),
        ("/activity", portal.activity, ["GET"]),
        ("/settings", portal.settings, ["GET"]),
        ("/settings/password", portal.change_password, ["POST"]),
        ("/settings/sessions", portal.end_other_sessions, ["POST"]),
        ("/settings/authenticator", portal.reset_authenticator, ["POST"]),
        ("/settings/authenticator/confirm", portal.confirm_authenticator, ["POST"]),
        ("/policy", policy_pages.show, ["GET"]),
        ("/policy/settings", policy_pages.settings, ["POST"]),
        ("/policy/rules", policy_pages.rules, ["POST"]),
    ]
    return [
        Route(PREFIX + path, _no_bearer(endpoint), methods=methods)
        for path, endpoint, methods in pages
    ]
