"""The activity list: every signature and refusal."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from paysign.portal.web import Portal


class ActivityPages:
    """What the agent asked for and what was decided."""

    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def activity(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        entries = await run_in_threadpool(self.portal.service.activity, session.account_id)
        return self.portal.render("activity.html", session, title="Activity", entries=entries)
