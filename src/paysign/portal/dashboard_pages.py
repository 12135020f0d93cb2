"""The overview (dashboard): balance, spend against caps, recent payments, approvals."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from paysign.portal.service import active_key
from paysign.portal.web import Portal


class DashboardPages:
    """What the wallet holds, spends and signs."""

    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def home(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        overview = await run_in_threadpool(self.portal.service.overview, session.account_id)
        active = active_key(overview.keys, self.portal.service.clock.now())
        return self.portal.render(
            "home.html", session, title="Overview", overview=overview, active=active
        )
