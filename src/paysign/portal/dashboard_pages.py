"""The overview (dashboard): what waits for a decision (pending sellers with their price), spend
against every cap, today's refusals by reason, the wallet and its testnet balance, the key's
expiry, recent payments, and the button that asks the faucet for test funds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.errors import FaucetRateLimited, FaucetTransferPending, SandboxChainUnavailable
from paysign.policy.caps import iso
from paysign.portal.display import network_name
from paysign.portal.web import FORM_EXPIRED, PREFIX, Portal, usdc_text
from paysign.services import portal_overview, sandbox_wallet
from paysign.services.portal_overview import REFUSALS_COUNTED, Overview
from paysign.services.sessions import Session


@dataclass(frozen=True, slots=True)
class SpendBar:
    """One window of the spend chart: what the template draws and reads out.

    >>> SpendBar.of("Today", 2_500_000, 10_000_000).text
    'Today: 2.5 of 10 USDC (25%)'
    >>> SpendBar.of("Today", 1, 10_000_000).percent, SpendBar.of("Today", 9, 5).percent
    (1, 100)
    >>> SpendBar.of("This month", 0, None).text
    'This month: 0 USDC spent, no cap'
    """

    label: str
    spent: int
    cap: int | None
    #: How much of the cap is used, 0-100 (the bar's length); None when there is no cap.
    percent: int | None

    @classmethod
    def of(cls, label: str, spent: int, cap: int | None) -> SpendBar:
        if cap is None:
            return cls(label, spent, cap, None)
        if spent == 0:
            return cls(label, spent, cap, 0)
        # Over the cap only after it was lowered; a sliver of spend still shows as 1%.
        return cls(label, spent, cap, 100 if spent >= cap else max(1, spent * 100 // cap))

    @property
    def text(self) -> str:
        """The bar in words, for screen readers and anyone without the picture."""
        spent = usdc_text(self.spent) or "0"
        if self.cap is None:
            return f"{self.label}: {spent} USDC spent, no cap"
        return f"{self.label}: {spent} of {usdc_text(self.cap) or '0'} USDC ({self.percent}%)"


class DashboardPages:
    """What the wallet holds, spends and signs."""

    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def _page(self, session: Session, *, status: int = 200, **context: Any) -> HTMLResponse:
        assert session.account_id is not None
        deps = self.portal.deps
        overview: Overview = await run_in_threadpool(
            portal_overview.overview, deps, session.account_id
        )
        # After the database read, not inside it: the chain may be slow or down.
        balance = await run_in_threadpool(sandbox_wallet.balance, deps, overview.wallet_address)
        live = await run_in_threadpool(sandbox_wallet.live_balance, deps, overview.wallet_address)
        return self.portal.render(
            "home.html",
            session,
            status=status,
            title="Overview",
            overview=overview,
            active=portal_overview.active_key(overview.keys, overview.now),
            balance=balance,
            sandbox=sandbox_wallet.configured(deps),
            live_balance=live,
            live_configured=sandbox_wallet.live_configured(deps),
            bars=[SpendBar.of(*window) for window in overview.spend],
            refusals_link=f"{PREFIX}/activity?decision=refused&from={iso(overview.now)[:10]}",
            refusals_counted=f"{REFUSALS_COUNTED:,}",
            faucet_amount=deps.test_funds_amount,
            **context,
        )

    async def home(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        return await self._page(session)

    async def request_test_funds(self, request: Request) -> Response:
        session, _ = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        amount = usdc_text(self.portal.deps.test_funds_amount)
        try:
            grant = await run_in_threadpool(
                sandbox_wallet.request_test_funds, self.portal.deps, session.account_id
            )
        except FaucetRateLimited as limited:
            page = await self._page(
                session, status=429, error=f"No test funds this time: {limited.detail}."
            )
            page.headers["Retry-After"] = str(limited.retry_after)
            return page
        except SandboxChainUnavailable as down:
            return await self._page(session, status=503, error=f"No test funds: {down.detail}")
        except FaucetTransferPending as pending:
            # Sent, not yet confirmed: not a refusal, a notice.
            return self.portal.after_post(
                "/", notice=f"{amount} test USDC are on the way: {pending.detail}."
            )
        return self.portal.after_post(
            "/",
            notice=f"{amount} test USDC were sent to your wallet "
            f"(transaction {grant.transaction_hash} on {network_name(grant.network)}).",
        )
