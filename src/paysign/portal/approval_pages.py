"""Sellers waiting for the human's decision: approve (allow list) or deny (deny list), one at a
time — by its exact path, a path prefix or its whole host — or a selection at once,
``PAGE_SIZE`` sellers a page (``?page=N``, on the forms' addresses too, so a decision shows the
same page again).

A bulk decision is one policy change: every selected seller is checked before anything is
written, approving them all takes one fresh authenticator code, and either every rule is
written or none is.
"""

from __future__ import annotations

from typing import Any, Literal

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.errors import InvalidPolicy
from paysign.policy.decide import MAX_PENDING_SELLERS, Tier
from paysign.portal.web import FORM_EXPIRED, Portal
from paysign.services import approvals, policy_edits
from paysign.services.sessions import Session
from paysign.services.sign_in import CredentialsRefused

_DONE = {"allow": "approved (allow list)", "deny": "denied (deny list)"}
TIER_NAMES = {
    Tier.PREMIUM: "Premium",
    Tier.STANDARD: "Standard",
    Tier.OPEN_ECOSYSTEM: "Open-ecosystem",
}
PAGE_SIZE = 50
BAD_PAGE = "“page” must be a page number (1, 2, …); nothing was changed."


def page_number(text: str) -> int | None:
    """The page a query string asks for; ``None`` unless it is a page number.

    >>> page_number("2"), page_number("0"), page_number("-1"), page_number("²"), page_number("")
    (2, None, None, None, None)
    """
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) < 1:
        return None
    return int(text)


def _reason(problem: InvalidPolicy) -> str:
    """The detail is "<JSON pointer>: <reason>"; a person reads just the reason."""
    reason = problem.detail.removeprefix(f"{problem.extensions.get('pointer')}: ")
    return f"{reason[:1].upper()}{reason[1:]}."


def _approvals_path(page: int) -> str:
    """The page of the queue a decision returns to."""
    return "/approvals" if page == 1 else f"/approvals?page={page}"


class ApprovalPages:
    """The approvals queue."""

    def __init__(self, portal: Portal, listings: approvals.Listings) -> None:
        self.portal = portal
        self.listings = listings

    async def _approvals_page(
        self, session: Session, page: int = 1, *, status: int = 200, **context: Any
    ) -> HTMLResponse:
        assert session.account_id is not None
        listing = await run_in_threadpool(
            approvals.pending_page,
            self.portal.deps.db,
            self.listings,
            session.account_id,
            page=page,
            size=PAGE_SIZE,
        )
        return self.portal.render(
            "approvals.html",
            session,
            status=status,
            title="Approvals",
            pending=listing.sellers,
            listing=listing,
            limit=MAX_PENDING_SELLERS,
            tier_names=TIER_NAMES,
            **context,
        )

    async def approvals(self, request: Request) -> Response:
        page = page_number(request.query_params.get("page", "1"))
        if request.method == "GET":
            session = await self.portal.session_of(request)
            if session is None or session.account_id is None:
                return self.portal.to_sign_in()
            if page is None:
                return await self._approvals_page(session, status=400, error=BAD_PAGE)
            return await self._approvals_page(session, page)
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        if page is None:
            return await self._approvals_page(session, status=400, error=BAD_PAGE)
        decision = form.get("decision", "")
        seller = form.get("seller", "")
        if decision not in ("allow", "deny"):
            return await self._approvals_page(session, page, status=400, error="Approve or deny.")
        kind: Literal["allow", "deny"] = "allow" if decision == "allow" else "deny"
        try:
            rule = await run_in_threadpool(
                approvals.decide,
                self.portal.deps,
                session.account_id,
                seller,
                form.get("scope", ""),
                kind,
                form.get("totp", ""),
            )
        except InvalidPolicy as problem:
            return await self._approvals_page(session, page, status=400, error=_reason(problem))
        except CredentialsRefused as refused:
            status = 429 if refused.rate_limited else 401
            return await self._approvals_page(session, page, status=status, error=refused.message)
        return self.portal.after_post(_approvals_path(page), notice=f"{rule}: {_DONE[kind]}.")

    async def bulk(self, request: Request) -> Response:
        """Approve or deny the selected sellers (repeated ``seller`` fields) together."""
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        page = page_number(request.query_params.get("page", "1"))
        if page is None:
            return await self._approvals_page(session, status=400, error=BAD_PAGE)
        # ``form_session`` keeps one value per field; the selection repeats ``seller``.
        # Starlette parsed the body once and caches it, so this reads no more of it.
        sellers = [
            value for value in (await request.form()).getlist("seller") if isinstance(value, str)
        ]
        decision = form.get("decision", "")
        if decision not in ("allow", "deny"):
            return await self._approvals_page(
                session, page, status=400, error="Approve or deny the selection."
            )
        kind: Literal["allow", "deny"] = "allow" if decision == "allow" else "deny"
        try:
            rules = await run_in_threadpool(
                policy_edits.decide_many,
                self.portal.deps,
                session.account_id,
                sellers,
                kind,
                form.get("totp", ""),
            )
        except InvalidPolicy as problem:
            return await self._approvals_page(session, page, status=400, error=_reason(problem))
        except CredentialsRefused as refused:
            message = (
                refused.message
                if form.get("totp", "").strip()
                else "Approving lets your agent pay these sellers: enter a fresh authenticator "
                "code. Nothing was changed."
            )
            status = 429 if refused.rate_limited else 401
            return await self._approvals_page(session, page, status=status, error=message)
        listed = ", ".join(rules)
        return self.portal.after_post(
            _approvals_path(page), notice=f"{len(rules)} seller(s) {_DONE[kind]}: {listed}."
        )
