"""Signing up, in and out, and the settings page (password, authenticator, other sessions)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from paysign.errors import AccountAlreadyExists, InvalidAccountInput
from paysign.portal.web import FORM_EXPIRED, HEADERS, PREFIX, Portal
from paysign.services import account_security, portal_sign_in
from paysign.services.accounts import MIN_PASSWORD_LENGTH
from paysign.services.sessions import Session
from paysign.services.sign_in import CredentialsRefused

# Every use of this answer counts as a failed sign-in of the client's address, so looking up
# accounts through this form is as rate-limited as through the sign-in form.
EMAIL_UNAVAILABLE = (
    "This email address cannot be used for a new account. If you already have one, sign in."
)


class AccountPages:
    """Pages about the account holder themself, not the wallet."""

    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def sign_in(self, request: Request) -> Response:
        if request.method == "GET":
            session = await self.portal.session_of(request)
            if session is not None and session.account_id:
                return RedirectResponse(f"{PREFIX}/", status_code=303, headers=HEADERS)
            if session is None:
                session = self.portal.deps.sessions.start_anonymous()
            return self.portal.render("sign_in.html", session, title="Sign in to paysign")
        session, form = await self.portal.form_session(request)
        if session is None:
            fresh = self.portal.deps.sessions.start_anonymous()
            return self.portal.render(
                "sign_in.html", fresh, status=403, title="Sign in to paysign", error=FORM_EXPIRED
            )
        address = request.client.host if request.client else "unknown"
        try:
            signed_in = await run_in_threadpool(
                portal_sign_in.sign_in,
                self.portal.deps,
                session,
                form.get("email", ""),
                form.get("password", ""),
                form.get("totp", ""),
                address,
            )
        except CredentialsRefused as refused:
            return self.portal.render(
                "sign_in.html",
                session,
                status=429 if refused.rate_limited else 401,
                title="Sign in to paysign",
                error=refused.message,
                email=form.get("email", "")[:320],
            )
        response = RedirectResponse(f"{PREFIX}/", status_code=303, headers=HEADERS)
        self.portal.set_cookie(response, signed_in)
        return response

    async def sign_up(self, request: Request) -> Response:
        title = "Create a paysign account"
        if request.method == "GET":
            session = await self.portal.session_of(request)
            if session is None:
                session = self.portal.deps.sessions.start_anonymous()
            return self.portal.render(
                "sign_up.html", session, title=title, min_password=MIN_PASSWORD_LENGTH
            )
        session, form = await self.portal.form_session(request)
        if session is None:
            fresh = self.portal.deps.sessions.start_anonymous()
            return self.portal.render(
                "sign_up.html",
                fresh,
                status=403,
                title=title,
                error=FORM_EXPIRED,
                min_password=MIN_PASSWORD_LENGTH,
            )
        address = request.client.host if request.client else "unknown"
        try:
            created, uri = await run_in_threadpool(
                portal_sign_in.sign_up,
                self.portal.deps,
                form.get("email", ""),
                form.get("password", ""),
                address,
            )
        except (InvalidAccountInput, AccountAlreadyExists, CredentialsRefused) as problem:
            if isinstance(problem, CredentialsRefused):
                status, error = 429 if problem.rate_limited else 400, problem.message
            elif isinstance(problem, AccountAlreadyExists):
                status, error = 400, EMAIL_UNAVAILABLE
            else:
                status, error = 400, problem.detail
            return self.portal.render(
                "sign_up.html",
                session,
                status=status,
                title=title,
                error=error,
                email=form.get("email", "")[:320],
                min_password=MIN_PASSWORD_LENGTH,
            )
        return self.portal.render(
            "enrol.html",
            session,
            title="Set up your authenticator",
            secret=created.totp_secret,
            uri=uri,
            email=created.email,
            wallet=created.wallet_address,
        )

    async def sign_out(self, request: Request) -> Response:
        session, _ = await self.portal.form_session(request)
        if session is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        await run_in_threadpool(self.portal.deps.sessions.end, session)
        response = RedirectResponse(f"{PREFIX}/sign-in", status_code=303, headers=HEADERS)
        response.delete_cookie(
            self.portal.cookie_name,
            path="/",
            secure=self.portal.secure,
            httponly=True,
            samesite="lax",
        )
        return response

    async def settings(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        return await self._settings_page(session)

    async def _settings_page(
        self, session: Session, *, status: int = 200, **context: Any
    ) -> Response:
        assert session.account_id is not None
        assistants = await run_in_threadpool(
            account_security.connected_assistants, self.portal.deps, session.account_id
        )
        return self.portal.render(
            "settings.html",
            session,
            status=status,
            title="Settings",
            min_password=MIN_PASSWORD_LENGTH,
            assistants=assistants,
            **context,
        )

    async def change_password(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        try:
            ended = await run_in_threadpool(
                account_security.change_password,
                self.portal.deps,
                session,
                form.get("current", ""),
                form.get("new", ""),
                form.get("totp", ""),
            )
        except InvalidAccountInput as problem:
            return await self._settings_page(session, status=400, error=problem.detail)
        except CredentialsRefused as refused:
            status = 429 if refused.rate_limited else 401
            return await self._settings_page(session, status=status, error=refused.message)
        return self.portal.after_post("/settings", notice=f"Password changed. {ended}")

    async def reset_authenticator(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        try:
            secret, uri, token = await run_in_threadpool(
                account_security.start_authenticator_reset,
                self.portal.deps,
                session,
                form.get("current", ""),
                form.get("totp", ""),
            )
        except CredentialsRefused as refused:
            status = 429 if refused.rate_limited else 401
            return await self._settings_page(session, status=status, error=refused.message)
        return self.portal.render(
            "authenticator.html",
            session,
            title="Set up the new authenticator",
            secret=secret,
            uri=uri,
            token=token,
        )

    async def confirm_authenticator(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        try:
            ended = await run_in_threadpool(
                account_security.confirm_authenticator_reset,
                self.portal.deps,
                session,
                form.get("token", ""),
                form.get("totp", ""),
            )
        except CredentialsRefused as refused:
            return await self._settings_page(session, status=400, error=refused.message)
        return self.portal.after_post(
            "/settings", notice=f"The new authenticator is in use. {ended}"
        )

    async def end_other_sessions(self, request: Request) -> Response:
        session, _ = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        ended = await run_in_threadpool(
            account_security.end_other_sessions, self.portal.deps, session
        )
        return self.portal.after_post("/settings", notice=f"{ended} other session(s) signed out.")

    async def disconnect_assistants(self, request: Request) -> Response:
        session, _ = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        ended = await run_in_threadpool(
            account_security.disconnect_assistants, self.portal.deps, session.account_id
        )
        return self.portal.after_post(
            "/settings", notice=f"{ended} connected assistant(s) disconnected."
        )
