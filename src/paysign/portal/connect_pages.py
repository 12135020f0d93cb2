"""The Connect page: where an assistant or a program reaches paysign, and ready-to-copy
settings for the common ones. The snippets name the API key by a placeholder, never the key:
it is shown once, on the key page, and a page that repeated it would be one more place for it
to leak from (a screenshot, a shared screen).

The assistants connected with OAuth are listed with a button each that revokes that one
(every sign-in of its client); the settings page disconnects them all at once."""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from paysign.portal.web import FORM_EXPIRED, Portal
from paysign.services import account_security, portal_connect
from paysign.services.sessions import Session

KEY_PLACEHOLDER = "<YOUR_API_KEY>"
#: Client ids are at most this long (``oauth_clients.client_id``).
MAX_CLIENT_ID = 64
NOT_CONNECTED = "That assistant is not connected to your account; nothing was changed."


@dataclass(frozen=True, slots=True)
class Snippet:
    id: str
    title: str
    where: str
    text: str


def snippets(api_url: str, mcp_url: str) -> list[Snippet]:
    """The copyable settings, for a paysign at ``api_url`` with its MCP connector at
    ``mcp_url``."""
    bearer = f"Bearer {KEY_PLACEHOLDER}"
    mcp_entry = {"type": "http", "url": mcp_url, "headers": {"Authorization": bearer}}
    claude_desktop = {
        "mcpServers": {
            "paysign": {
                "command": "npx",
                "args": ["-y", "mcp-remote", mcp_url, "--header", f"Authorization:{bearer}"],
            }
        }
    }
    return [
        Snippet(
            "snippet-python",
            "Python client",
            "pip install paysign, then in your program:",
            "from paysign.client import PaysignClient\n\n"
            f'with PaysignClient(api_key="{KEY_PLACEHOLDER}", paysign_url="{api_url}") as http:\n'
            '    response = http.get("https://seller.example/paid/resource")\n'
            "    print(response.status_code, response.text)",
        ),
        Snippet(
            "snippet-mcp-sdk",
            "MCP Python SDK",
            "An agent of your own, over streamable HTTP:",
            "import asyncio\n\n"
            "from mcp import Client\n"
            "from mcp.client.streamable_http import create_mcp_http_client, "
            "streamable_http_client\n\n\n"
            "async def main():\n"
            f'    headers = {{"Authorization": "{bearer}"}}\n'
            "    async with (\n"
            "        create_mcp_http_client(headers=headers) as http,\n"
            f'        Client(streamable_http_client("{mcp_url}", http_client=http)) as client,\n'
            "    ):\n"
            "        tools = await client.list_tools()\n"
            "        print([tool.name for tool in tools.tools])\n\n\n"
            "asyncio.run(main())",
        ),
        Snippet(
            "snippet-claude-code",
            "Claude Code",
            "In a terminal:",
            f'claude mcp add --transport http paysign {mcp_url} --header "Authorization: {bearer}"',
        ),
        Snippet(
            "snippet-claude-desktop",
            "Claude Desktop",
            "In claude_desktop_config.json (Settings → Developer → Edit config):",
            json.dumps(claude_desktop, indent=2),
        ),
        Snippet(
            "snippet-cursor",
            "Cursor",
            "In ~/.cursor/mcp.json (or .cursor/mcp.json in a project):",
            json.dumps({"mcpServers": {"paysign": mcp_entry}}, indent=2),
        ),
        Snippet(
            "snippet-vscode",
            "VS Code",
            "In .vscode/mcp.json:",
            json.dumps({"servers": {"paysign": mcp_entry}}, indent=2),
        ),
    ]


class ConnectPages:
    def __init__(self, portal: Portal, *, api_url: str, mcp_url: str, auth_url: str) -> None:
        self.portal = portal
        self.api_url, self.mcp_url, self.auth_url = api_url, mcp_url, auth_url
        self.snippets = snippets(api_url, mcp_url)

    async def connect(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        return await self._connect_page(session)

    async def disconnect(self, request: Request) -> Response:
        """Revoke one assistant: every grant its client holds for this account."""
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        client_id = form.get("client", "")
        # An empty id would mean "every assistant" to the use case: that is the settings
        # page's button, never this one's.
        if not client_id or len(client_id) > MAX_CLIENT_ID:
            return await self._connect_page(session, status=400, error=NOT_CONNECTED)
        ended = await run_in_threadpool(
            account_security.disconnect_assistants,
            self.portal.deps,
            session.account_id,
            client_id,
        )
        if not ended:
            return await self._connect_page(session, status=404, error=NOT_CONNECTED)
        return self.portal.after_post(
            "/connect", notice=f"Assistant revoked: {ended} sign-in(s) ended."
        )

    async def _connect_page(
        self, session: Session, *, status: int = 200, error: str = ""
    ) -> Response:
        assert session.account_id is not None
        found = await run_in_threadpool(
            portal_connect.connection, self.portal.deps, session.account_id
        )
        return self.portal.render(
            "connect.html",
            session,
            status=status,
            error=error,
            title="Connect an assistant",
            connection=found,
            api_url=self.api_url,
            mcp_url=self.mcp_url,
            auth_url=self.auth_url,
            snippets=self.snippets,
            placeholder=KEY_PLACEHOLDER,
        )
