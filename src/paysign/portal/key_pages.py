"""The API key page: create one (with a fresh authenticator code), see it, revoke it."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.errors import ActiveKeyExists, InvalidKeyExpiry, NoActiveKey
from paysign.portal.web import FORM_EXPIRED, Portal
from paysign.services import portal_keys, portal_overview
from paysign.services.keys import MAX_EXPIRY_DAYS
from paysign.services.sessions import Session
from paysign.services.sign_in import CredentialsRefused


class KeyPages:
    """The one active API key and the ones before it."""

    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def _keys_page(
        self, session: Session, *, status: int = 200, **context: Any
    ) -> HTMLResponse:
        assert session.account_id is not None
        overview = await run_in_threadpool(
            portal_overview.overview, self.portal.deps, session.account_id
        )
        active = portal_overview.active_key(overview.keys, overview.now)
        past = [k for k in overview.keys if k is not active]
        return self.portal.render(
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
            session = await self.portal.session_of(request)
            if session is None or session.account_id is None:
                return self.portal.to_sign_in()
            return await self._keys_page(session)
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        try:
            days = int(form.get("days", ""))
        except ValueError:
            return await self._keys_page(
                session, status=400, error=f"Choose an expiry of 1 to {MAX_EXPIRY_DAYS} days."
            )
        try:
            issued = await run_in_threadpool(
                portal_keys.create_key,
                self.portal.deps,
                session.account_id,
                form.get("totp", ""),
                days,
            )
        except CredentialsRefused as refused:
            status = 429 if refused.rate_limited else 401
            return await self._keys_page(session, status=status, error=refused.message)
        except (InvalidKeyExpiry, ActiveKeyExists) as problem:
            return await self._keys_page(session, status=400, error=problem.detail)
        return await self._keys_page(session, issued=issued)

    async def revoke_key(self, request: Request) -> Response:
        session, _ = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        try:
            await run_in_threadpool(portal_keys.revoke_key, self.portal.deps, session.account_id)
        except NoActiveKey:
            return await self._keys_page(session, status=400, error="There is no active key.")
        return self.portal.after_post("/keys", notice="The key is revoked; it no longer works.")
