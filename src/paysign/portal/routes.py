"""The portal's HTTP surface, mounted at ``/portal``: thin handlers that read the session and
the form, call one use case in ``paysign.services``, and render a template. One module per area.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from paysign.portal.account_pages import AccountPages
from paysign.portal.activity_pages import ActivityPages
from paysign.portal.approval_pages import ApprovalPages
from paysign.portal.connect_pages import ConnectPages
from paysign.portal.dashboard_pages import DashboardPages
from paysign.portal.key_pages import KeyPages
from paysign.portal.notification_pages import NotificationPages
from paysign.portal.policy_pages import PolicyPages
from paysign.portal.web import PREFIX, Endpoint, Portal, no_bearer, static_file
from paysign.portal.withdraw_pages import WithdrawPages
from paysign.services.approvals import Listings
from paysign.services.portal_deps import PortalRuntime


async def to_portal(request: Request) -> Response:
    """The site's root: people who type the bare address land in the portal."""
    return RedirectResponse(f"{PREFIX}/", status_code=303)


def create_portal(runtime: PortalRuntime, listings: Listings) -> list[BaseRoute]:
    """The portal's routes, with their full paths under ``/portal``, and ``GET /`` leading
    there (unless a route mounted before these, the MCP connector's, is at ``/``); ``listings``
    is the catalog the approvals page names pending sellers' listings from."""
    portal = Portal(runtime)
    account = AccountPages(portal)
    dashboard = DashboardPages(portal)
    activity = ActivityPages(portal)
    keys = KeyPages(portal)
    approvals = ApprovalPages(portal, listings)
    policy = PolicyPages(portal)
    withdraw = WithdrawPages(portal)
    settings = runtime.settings
    notices = NotificationPages(portal, email_enabled=bool(settings.smtp_url))
    connect = ConnectPages(
        portal,
        api_url=settings.resolved_base_url,
        mcp_url=settings.resolved_mcp_url,
        auth_url=settings.resolved_auth_url,
    )
    pages: list[tuple[str, Endpoint, list[str]]] = [
        ("/", dashboard.home, ["GET"]),
        ("/faucet", dashboard.request_test_funds, ["POST"]),
        ("/static/portal.js", static_file("portal.js", "text/javascript"), ["GET"]),
        ("/static/portal.css", static_file("portal.css", "text/css"), ["GET"]),
        ("/connect", connect.connect, ["GET"]),
        ("/connect/assistants", connect.disconnect, ["POST"]),
        ("/activity", activity.activity, ["GET"]),
        ("/activity.csv", activity.export, ["GET"]),
        ("/sign-in", account.sign_in, ["GET", "POST"]),
        ("/sign-up", account.sign_up, ["GET", "POST"]),
        ("/sign-out", account.sign_out, ["POST"]),
        ("/settings", account.settings, ["GET"]),
        ("/settings/password", account.change_password, ["POST"]),
        ("/settings/sessions", account.end_other_sessions, ["POST"]),
        ("/settings/assistants", account.disconnect_assistants, ["POST"]),
        ("/settings/authenticator", account.reset_authenticator, ["POST"]),
        ("/settings/authenticator/confirm", account.confirm_authenticator, ["POST"]),
        ("/notifications", notices.show, ["GET"]),
        ("/notifications", notices.add, ["POST"]),
        ("/notifications/remove", notices.remove, ["POST"]),
        ("/notifications/test", notices.send_test, ["POST"]),
        ("/keys", keys.keys, ["GET", "POST"]),
        ("/keys/revoke", keys.revoke_key, ["POST"]),
        ("/approvals", approvals.approvals, ["GET", "POST"]),
        ("/approvals/bulk", approvals.bulk, ["POST"]),
        ("/policy", policy.show, ["GET"]),
        ("/policy/settings", policy.settings, ["POST"]),
        ("/policy/rules", policy.rules, ["POST"]),
        ("/policy/preview", policy.preview, ["POST"]),
        ("/policy/freeze", policy.freeze, ["POST"]),
        ("/withdraw", withdraw.show, ["GET"]),
        ("/withdraw/review", withdraw.review, ["POST"]),
        ("/withdraw", withdraw.confirm, ["POST"]),
    ]
    return [
        *(
            Route(PREFIX + path, no_bearer(portal, endpoint), methods=methods)
            for path, endpoint, methods in pages
        ),
        Route("/", to_portal, methods=["GET"]),
    ]
