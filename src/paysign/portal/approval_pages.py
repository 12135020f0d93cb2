"""Sellers waiting for the human's decision: approve (allow list) or deny (deny list)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.errors import InvalidPolicy
from paysign.portal.sessions import Session
from paysign.portal.web import FORM_EXPIRED, Portal
from paysign.services.sign_in import CredentialsRefused


class ApprovalPages:
    """The approvals queue."""

    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def _approvals_page(
        self, session: Session, *, status: int = 200, **context: Any
    ) -> HTMLResponse:
        assert session.account_id is not None
        overview = await run_in_threadpool(self.portal.service.overview, session.account_id)
        return self.portal.render(
            "approvals.html",
            session,
            status=status,
            title="Approvals",
            pending=overview.pending,
            **context,
        )

    async def approvals(self, request: Request) -> Response:
        if request.method == "GET":
            session = await self.portal.session_of(request)
            if session is None or session.account_id is None:
                return self.portal.to_sign_in()
            return await self._approvals_page(session)
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        decision = form.get("decision", "")
        seller = form.get("seller", "")
        if decision not in ("allow", "deny"):
            return await self._approvals_page(session, status=400, error="Approve or deny.")
        try:
            await run_in_threadpool(
                self.portal.service.decide,
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
