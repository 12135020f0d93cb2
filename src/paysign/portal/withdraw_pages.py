"""Withdraw: the holder types an address and an amount, reviews them on a confirmation page
(the address checksummed, the amount in USDC) and confirms with a fresh authenticator code."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.errors import WithdrawalPending, WithdrawalRefused, WithdrawalUnavailable
from paysign.portal.display import network_name
from paysign.portal.web import FORM_EXPIRED, Portal, usdc_text
from paysign.services import withdrawals
from paysign.services.sessions import Session
from paysign.services.sign_in import CredentialsRefused

_NETWORKS = [(network, name) for network, name in withdrawals.NETWORKS.items()]


class WithdrawPages:
    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def _form(self, session: Session, *, status: int = 200, **context: Any) -> HTMLResponse:
        assert session.account_id is not None
        history = await run_in_threadpool(withdrawals.history, self.portal.deps, session.account_id)
        return self.portal.render(
            "withdraw.html",
            session,
            status=status,
            title="Withdraw USDC",
            networks=_NETWORKS,
            history=history,
            **context,
        )

    async def show(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        return await self._form(session)

    async def review(self, request: Request) -> Response:
        """The confirmation page: what will be sent, where; nothing is sent yet."""
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        typed = _typed(form)
        try:
            plan = await run_in_threadpool(
                withdrawals.review,
                self.portal.deps,
                session.account_id,
                typed["network"],
                typed["to"],
                typed["amount"],
            )
        except WithdrawalRefused as refused:
            return await self._form(session, status=400, error=refused.detail, typed=typed)
        except WithdrawalUnavailable as down:
            return await self._form(session, status=503, error=down.detail, typed=typed)
        return self.portal.render(
            "withdraw_confirm.html", session, title="Confirm the withdrawal", plan=plan
        )

    async def confirm(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        typed = _typed(form)
        code = form.get("totp", "")
        try:
            sent = await run_in_threadpool(
                withdrawals.withdraw,
                self.portal.deps,
                session.account_id,
                typed["network"],
                typed["to"],
                typed["amount"],
                code,
            )
        except WithdrawalRefused as refused:
            return await self._form(session, status=400, error=refused.detail, typed=typed)
        except WithdrawalUnavailable as down:
            return await self._form(session, status=503, error=down.detail, typed=typed)
        except CredentialsRefused as refused:
            message = (
                refused.message
                if code.strip()
                else "A withdrawal moves your money: enter a fresh authenticator code."
            )
            return await self._form(
                session,
                status=429 if refused.rate_limited else 401,
                error=f"Nothing was sent. {message}",
                typed=typed,
            )
        except WithdrawalPending as pending:
            return self.portal.after_post("/withdraw", notice=f"Withdrawal: {pending.detail}.")
        return self.portal.after_post(
            "/withdraw",
            notice=f"{usdc_text(sent.amount)} USDC were sent to {sent.to_address} "
            f"(transaction {sent.transaction_hash} on {network_name(sent.network)}).",
        )


def _typed(form: dict[str, str]) -> dict[str, str]:
    return {
        "network": form.get("network", ""),
        "to": form.get("to", "").strip(),
        "amount": form.get("amount", "").strip(),
    }
