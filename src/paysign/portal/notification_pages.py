"""The notifications page: the holder's webhooks (the signing secret shown once) and email
addresses, a test to send, and what was delivered (status, attempts, last error)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.errors import InvalidAccountInput
from paysign.portal.web import FORM_EXPIRED, Portal
from paysign.services import notifications
from paysign.services.sessions import Session


class NotificationPages:
    def __init__(self, portal: Portal, *, email_enabled: bool) -> None:
        self.portal = portal
        self.email_enabled = email_enabled

    async def _page(self, session: Session, *, status: int = 200, **context: Any) -> HTMLResponse:
        assert session.account_id is not None
        current = await run_in_threadpool(
            notifications.notification_settings, self.portal.deps.db, session.account_id
        )
        return self.portal.render(
            "notifications.html",
            session,
            status=status,
            title="Notifications",
            targets=current.targets,
            deliveries=current.deliveries,
            email_enabled=self.email_enabled,
            **context,
        )

    async def show(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        return await self._page(session)

    async def add(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        deps = self.portal.deps
        try:
            if form.get("kind") == "email":
                if not self.email_enabled:
                    return await self._page(
                        session, status=400, error="Email is not configured on this server."
                    )
                await run_in_threadpool(
                    notifications.add_email,
                    deps.db,
                    deps.clock,
                    session.account_id,
                    form.get("email", ""),
                )
                return self.portal.after_post("/notifications", notice="The address is added.")
            webhook = await run_in_threadpool(
                notifications.add_webhook,
                deps.db,
                deps.vault,
                deps.clock,
                session.account_id,
                form.get("url", ""),
            )
        except InvalidAccountInput as problem:
            return await self._page(session, status=400, error=problem.detail)
        # Not a redirect: the secret is shown this once, never stored where it could be read.
        return await self._page(session, new_secret=webhook.secret, new_url=webhook.target.url)

    async def remove(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        removed = await run_in_threadpool(
            notifications.remove_target,
            self.portal.deps.db,
            session.account_id,
            form.get("target", ""),
        )
        if not removed:
            return await self._page(session, status=400, error="There is no such target.")
        return self.portal.after_post("/notifications", notice="The target is removed.")

    async def send_test(self, request: Request) -> Response:
        session, _ = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        deps = self.portal.deps
        try:
            queued = await run_in_threadpool(
                notifications.send_test, deps.db, deps.clock, session.account_id
            )
        except notifications.TooManyTestSends as limited:
            page = await self._page(
                session, status=429, error=f"No test this time: {limited.detail}"
            )
            page.headers["Retry-After"] = str(limited.retry_after)
            return page
        if not queued:
            return await self._page(session, status=400, error="Add a webhook or email first.")
        return self.portal.after_post(
            "/notifications", notice="A test is on its way; its delivery is listed below."
        )
